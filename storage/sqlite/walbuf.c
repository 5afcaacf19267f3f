/*
** A VFS that writes the write-ahead log's frames in one system call a commit.
**
** SQLite writes each frame of a commit as two writes, its 24-byte header and then its
** page. On a virtual machine a write system call costs a few microseconds whatever its
** size, so a commit of forty frames spent more time entering the kernel than copying.
** This VFS is the default one but for the log: there it holds the header of a frame
** appended right after the last write until the frame's page comes, keeps consecutive
** frames in memory, and passes them on as one write once the commit's last frame (the
** one that carries the commit mark, always the last frame a commit appends) has come,
** or before anything that looks at the file (a read, a sync, its size, a truncation, a
** file control). Any other write (the log's header, a page written again in place, the
** checksums SQLite rewrites after one) passes on what waits and goes through at once.
** So, under synchronous FULL or NORMAL, every frame of a commit is in the file before
** SQLite syncs it and before it makes the commit visible to readers (which read
** through files of their own), in the order SQLite wrote them: what a crash of the
** process leaves is what it left without this VFS.
**
** What a transaction that is rolled back wrote of its frames (when it spilled pages
** from a full cache) is dropped when the connection lets go of the log's write lock,
** which this VFS sees on the database file's shared memory (or, in exclusive locking
** mode, when it unlocks the database file): written later, it would
** land on frames another connection (the command line, another process) committed
** meanwhile. A log whose database file this VFS did not open is written as SQLite
** writes it. A deferred write that fails surfaces from the call that passed it on; from
** any call but a write it is an I/O error, which rolls the whole transaction back.
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "walbuf.h"

#define WALBUF_NAME "hookdedup-walbuf"
#define WALBUF_FRAME_HEADER 24
/* The most the default VFS writes in one call: it masks a write's length to 17 bits. */
#define WALBUF_CAP 0x1ffff

typedef struct WalbufFile WalbufFile;
typedef struct WalBuf WalBuf;
typedef struct WalbufDb WalbufDb;

/* WalbufFile is how both kinds of file begin: a call that this VFS only passes on goes
** to real through one function for both (the pt* functions). */
struct WalbufFile {
  sqlite3_file base;
  sqlite3_file *real;      /* the default VFS's file, right after the whole struct */
};
#define WALBUF_REAL(f) (((WalbufFile*)(f))->real)

/* WalbufDb is a database file: its log's WalBuf, while the log is open, learns from
** it when the write lock is let go. */
struct WalbufDb {
  WalbufFile f;
  const char *name;        /* the name it was opened by, which its log's name leads to */
  WalBuf *wal;
  WalbufDb *next;          /* in walbufDbs */
};

struct WalBuf {
  WalbufFile f;
  WalbufDb *db;            /* its database file; 0: every write goes through */
  char *buf;               /* frames not passed on yet, from start on */
  int len;
  sqlite3_int64 start;
  char header[WALBUF_FRAME_HEADER];  /* a frame's header waiting for its page */
  int hasHeader;
  sqlite3_int64 headerAt;
  sqlite3_int64 end;       /* where SQLite's last write to the log ended */
};

static sqlite3_vfs walbufVfs;
static sqlite3_vfs *walbufReal;

/* The database files open, so that a log can find its own. */
static pthread_mutex_t walbufMu = PTHREAD_MUTEX_INITIALIZER;
static WalbufDb *walbufDbs;

/* Frames written through a buffer: tests see that logs are buffered at all. */
static long long walbufFramesBuffered;

/* The calls passed on as they are, for both kinds of file. */
static int ptRead(sqlite3_file *f, void *z, int n, sqlite3_int64 at){ return WALBUF_REAL(f)->pMethods->xRead(WALBUF_REAL(f), z, n, at); }
static int ptWrite(sqlite3_file *f, const void *z, int n, sqlite3_int64 at){ return WALBUF_REAL(f)->pMethods->xWrite(WALBUF_REAL(f), z, n, at); }
static int ptTruncate(sqlite3_file *f, sqlite3_int64 size){ return WALBUF_REAL(f)->pMethods->xTruncate(WALBUF_REAL(f), size); }
static int ptSync(sqlite3_file *f, int flags){ return WALBUF_REAL(f)->pMethods->xSync(WALBUF_REAL(f), flags); }
static int ptFileSize(sqlite3_file *f, sqlite3_int64 *size){ return WALBUF_REAL(f)->pMethods->xFileSize(WALBUF_REAL(f), size); }
static int ptLock(sqlite3_file *f, int lock){ return WALBUF_REAL(f)->pMethods->xLock(WALBUF_REAL(f), lock); }
static int ptUnlock(sqlite3_file *f, int lock){ return WALBUF_REAL(f)->pMethods->xUnlock(WALBUF_REAL(f), lock); }
static int ptCheckReservedLock(sqlite3_file *f, int *out){ return WALBUF_REAL(f)->pMethods->xCheckReservedLock(WALBUF_REAL(f), out); }
static int ptFileControl(sqlite3_file *f, int op, void *arg){ return WALBUF_REAL(f)->pMethods->xFileControl(WALBUF_REAL(f), op, arg); }
static int ptSectorSize(sqlite3_file *f){ return WALBUF_REAL(f)->pMethods->xSectorSize(WALBUF_REAL(f)); }
static int ptDeviceCharacteristics(sqlite3_file *f){ return WALBUF_REAL(f)->pMethods->xDeviceCharacteristics(WALBUF_REAL(f)); }
static int ptShmMap(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp){
  if( WALBUF_REAL(f)->pMethods->iVersion<2 ) return SQLITE_ERROR;
  return WALBUF_REAL(f)->pMethods->xShmMap(WALBUF_REAL(f), pg, pgsz, extend, pp);
}
static int ptShmLock(sqlite3_file *f, int offset, int n, int flags){
  if( WALBUF_REAL(f)->pMethods->iVersion<2 ) return SQLITE_ERROR;
  return WALBUF_REAL(f)->pMethods->xShmLock(WALBUF_REAL(f), offset, n, flags);
}
static void ptShmBarrier(sqlite3_file *f){
  if( WALBUF_REAL(f)->pMethods->iVersion>=2 ) WALBUF_REAL(f)->pMethods->xShmBarrier(WALBUF_REAL(f));
}
static int ptShmUnmap(sqlite3_file *f, int deleteFlag){
  if( WALBUF_REAL(f)->pMethods->iVersion<2 ) return SQLITE_OK;
  return WALBUF_REAL(f)->pMethods->xShmUnmap(WALBUF_REAL(f), deleteFlag);
}
static int ptFetch(sqlite3_file *f, sqlite3_int64 at, int n, void **pp){
  *pp = 0;
  if( WALBUF_REAL(f)->pMethods->iVersion<3 ) return SQLITE_OK;  /* no map: SQLite reads instead */
  return WALBUF_REAL(f)->pMethods->xFetch(WALBUF_REAL(f), at, n, pp);
}
static int ptUnfetch(sqlite3_file *f, sqlite3_int64 at, void *ptr){
  if( WALBUF_REAL(f)->pMethods->iVersion<3 ) return SQLITE_OK;
  return WALBUF_REAL(f)->pMethods->xUnfetch(WALBUF_REAL(f), at, ptr);
}

/* walbufPass writes what p holds: its frames, then a header that waits. */
static int walbufPass(WalBuf *p){
  int rc = SQLITE_OK;
  if( p->len>0 ){
    rc = p->f.real->pMethods->xWrite(p->f.real, p->buf, p->len, p->start);
    p->len = 0;
    if( rc!=SQLITE_OK ){
      p->hasHeader = 0;
      return rc;
    }
  }
  if( p->hasHeader ){
    p->hasHeader = 0;
    rc = p->f.real->pMethods->xWrite(p->f.real, p->header, WALBUF_FRAME_HEADER, p->headerAt);
  }
  return rc;
}

static int walbufWrite(sqlite3_file *f, const void *z, int n, sqlite3_int64 at){
  WalBuf *p = (WalBuf*)f;
  int rc;
  /* A frame appended: its header comes where the last write ended. A checksum SQLite
  ** rewrites is a header alone, over a frame written earlier, and goes through. */
  if( n==WALBUF_FRAME_HEADER && !p->hasHeader && at==p->end && p->db!=0 ){
    if( p->len>0 && p->start+p->len!=at ){
      rc = walbufPass(p);
      if( rc!=SQLITE_OK ) return rc;
    }
    memcpy(p->header, z, WALBUF_FRAME_HEADER);
    p->hasHeader = 1;
    p->headerAt = at;
    p->end = at+n;
    return SQLITE_OK;
  }
  if( p->hasHeader && at==p->headerAt+WALBUF_FRAME_HEADER && n<=WALBUF_CAP-WALBUF_FRAME_HEADER ){
    const unsigned char *h = (const unsigned char*)p->header;
    int commit = h[4]|h[5]|h[6]|h[7];  /* the database's size after a commit, else 0 */
    if( p->buf==0 ){
      p->buf = malloc(WALBUF_CAP);
      if( p->buf==0 ) goto through;
    }
    if( p->len>0 && p->len+WALBUF_FRAME_HEADER+n>WALBUF_CAP ){
      rc = p->f.real->pMethods->xWrite(p->f.real, p->buf, p->len, p->start);
      p->len = 0;
      if( rc!=SQLITE_OK ){
        p->hasHeader = 0;
        return rc;
      }
    }
    if( p->len==0 ) p->start = p->headerAt;
    memcpy(p->buf+p->len, p->header, WALBUF_FRAME_HEADER);
    memcpy(p->buf+p->len+WALBUF_FRAME_HEADER, z, n);
    p->len += WALBUF_FRAME_HEADER+n;
    p->hasHeader = 0;
    p->end = at+n;
    __atomic_add_fetch(&walbufFramesBuffered, 1, __ATOMIC_RELAXED);
    return commit ? walbufPass(p) : SQLITE_OK;
  }
through:
  p->end = at+n;
  rc = walbufPass(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->f.real->pMethods->xWrite(p->f.real, z, n, at);
}

/* What a log holds when it is closed is never a commit's: each commit passes its
** frames on before it is synced. It can only be what a transaction rolled back after
** spilling frames left behind, past the end of the log, and is dropped: written now,
** after a checkpoint through another connection truncated the log, it would leave
** the log of a server that stopped cleanly not empty. */
static int walbufClose(sqlite3_file *f){
  WalBuf *p = (WalBuf*)f;
  int rc;
  pthread_mutex_lock(&walbufMu);
  if( p->db ) p->db->wal = 0;
  p->db = 0;
  pthread_mutex_unlock(&walbufMu);
  rc = p->f.real->pMethods->xClose(p->f.real);
  free(p->buf);
  p->buf = 0;
  return rc;
}

/* walbufPassFor passes on what p holds before a call that is no write: a failure is
** an I/O error of that call, so that SQLite rolls the transaction back whole rather
** than a statement of it, whose spilled frames would be gone. */
static int walbufPassFor(WalBuf *p){
  return walbufPass(p)==SQLITE_OK ? SQLITE_OK : SQLITE_IOERR_WRITE;
}

static int walbufRead(sqlite3_file *f, void *z, int n, sqlite3_int64 at){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPassFor(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->f.real->pMethods->xRead(p->f.real, z, n, at);
}

static int walbufTruncate(sqlite3_file *f, sqlite3_int64 size){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPassFor(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->f.real->pMethods->xTruncate(p->f.real, size);
}

static int walbufSync(sqlite3_file *f, int flags){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPassFor(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->f.real->pMethods->xSync(p->f.real, flags);
}

static int walbufFileSize(sqlite3_file *f, sqlite3_int64 *size){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPassFor(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->f.real->pMethods->xFileSize(p->f.real, size);
}

static int walbufFileControl(sqlite3_file *f, int op, void *arg){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPassFor(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->f.real->pMethods->xFileControl(p->f.real, op, arg);
}

static int walbufFetch(sqlite3_file *f, sqlite3_int64 at, int n, void **pp){
  int rc = walbufPassFor((WalBuf*)f);
  *pp = 0;
  if( rc!=SQLITE_OK ) return rc;
  return ptFetch(f, at, n, pp);
}

static const sqlite3_io_methods walbufMethods = {
  3,
  walbufClose, walbufRead, walbufWrite, walbufTruncate, walbufSync, walbufFileSize,
  ptLock, ptUnlock, ptCheckReservedLock, walbufFileControl,
  ptSectorSize, ptDeviceCharacteristics,
  ptShmMap, ptShmLock, ptShmBarrier, ptShmUnmap,
  walbufFetch, ptUnfetch
};

/* The database file's methods: the default VFS's, but that letting go of the log's
** write lock (the first lock of its shared memory), or of the file's own lock, drops
** what the log holds, which by then is never a commit's. */
static int walbufDbClose(sqlite3_file *f){
  WalbufDb *p = (WalbufDb*)f;
  WalbufDb **q;
  pthread_mutex_lock(&walbufMu);
  for(q=&walbufDbs; *q; q=&(*q)->next){
    if( *q==p ){
      *q = p->next;
      break;
    }
  }
  if( p->wal ) p->wal->db = 0;
  p->wal = 0;
  pthread_mutex_unlock(&walbufMu);
  return p->f.real->pMethods->xClose(p->f.real);
}

/* walbufDrop forgets what d's log holds. */
static void walbufDrop(WalbufDb *d){
  if( d->wal ){
    d->wal->len = 0;
    d->wal->hasHeader = 0;
  }
}

static int walbufDbShmLock(sqlite3_file *f, int offset, int n, int flags){
  WalbufDb *p = (WalbufDb*)f;
  if( offset==0 && n>0 && (flags & SQLITE_SHM_UNLOCK) && (flags & SQLITE_SHM_EXCLUSIVE) ) walbufDrop(p);
  return ptShmLock(f, offset, n, flags);
}

/* In exclusive locking mode the log's write lock is never taken on the shared memory;
** leaving that mode unlocks the database file instead, after the transaction ended. */
static int walbufDbUnlock(sqlite3_file *f, int lock){
  walbufDrop((WalbufDb*)f);
  return WALBUF_REAL(f)->pMethods->xUnlock(WALBUF_REAL(f), lock);
}

static const sqlite3_io_methods walbufDbMethods = {
  3,
  walbufDbClose, ptRead, ptWrite, ptTruncate, ptSync, ptFileSize,
  ptLock, walbufDbUnlock, ptCheckReservedLock, ptFileControl,
  ptSectorSize, ptDeviceCharacteristics,
  ptShmMap, walbufDbShmLock, ptShmBarrier, ptShmUnmap,
  ptFetch, ptUnfetch
};

/* walbufOpenAs opens the file w (a WalBuf or a WalbufDb, of size bytes) through the
** default VFS into the room after it, and gives it methods m; it leaves w without
** methods when the default VFS opened nothing. */
static int walbufOpenAs(WalbufFile *w, size_t size, const sqlite3_io_methods *m,
                        sqlite3_filename name, int flags, int *outFlags){
  int rc;
  memset(w, 0, size);
  w->real = (sqlite3_file*)((char*)w + size);
  rc = walbufReal->xOpen(walbufReal, name, w->real, flags, outFlags);
  w->base.pMethods = w->real->pMethods==0 ? 0 : m;
  return rc;
}

/* walbufOpen opens every file as the default VFS does; the database file gets
** walbufDbMethods and its log walbufMethods, linked to each other. */
static int walbufOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *outFlags){
  int rc;
  (void)vfs;
  if( (flags & SQLITE_OPEN_MAIN_DB)!=0 && name!=0 ){
    WalbufDb *d = (WalbufDb*)f;
    rc = walbufOpenAs(&d->f, sizeof(*d), &walbufDbMethods, name, flags, outFlags);
    if( d->f.base.pMethods==0 ) return rc;
    d->name = name;
    pthread_mutex_lock(&walbufMu);
    d->next = walbufDbs;
    walbufDbs = d;
    pthread_mutex_unlock(&walbufMu);
    return rc;
  }
  if( (flags & SQLITE_OPEN_WAL)!=0 && name!=0 ){
    WalBuf *p = (WalBuf*)f;
    const char *db = sqlite3_filename_database(name);
    WalbufDb *d;
    rc = walbufOpenAs(&p->f, sizeof(*p), &walbufMethods, name, flags, outFlags);
    if( p->f.base.pMethods==0 ) return rc;
    pthread_mutex_lock(&walbufMu);
    for(d=walbufDbs; d; d=d->next){
      if( d->name==db && d->wal==0 ){
        d->wal = p;
        p->db = d;
        break;
      }
    }
    pthread_mutex_unlock(&walbufMu);
    return rc;
  }
  return walbufReal->xOpen(walbufReal, name, f, flags, outFlags);
}

/* hookdedup_walbuf_frames is how many frames went through a buffer so far. */
long long hookdedup_walbuf_frames(void){
  return __atomic_load_n(&walbufFramesBuffered, __ATOMIC_RELAXED);
}

/* hookdedup_walbuf_register registers the VFS under WALBUF_NAME, beside the default
** one, which stays the default. It returns SQLite's result code. */
int hookdedup_walbuf_register(void){
  sqlite3_vfs *real = sqlite3_vfs_find(0);
  if( real==0 ) return SQLITE_ERROR;
  if( sqlite3_vfs_find(WALBUF_NAME)!=0 ) return SQLITE_OK;
  walbufReal = real;
  walbufVfs = *real;
  walbufVfs.pNext = 0;
  walbufVfs.zName = WALBUF_NAME;
  walbufVfs.szOsFile = (int)(sizeof(WalBuf)>sizeof(WalbufDb) ? sizeof(WalBuf) : sizeof(WalbufDb)) + real->szOsFile;
  walbufVfs.xOpen = walbufOpen;
  return sqlite3_vfs_register(&walbufVfs, 0);
}
