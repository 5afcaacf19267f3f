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
*/
#include <stdlib.h>
#include <string.h>
#include "walbuf.h"

#define WALBUF_NAME "hookdedup-walbuf"
#define WALBUF_FRAME_HEADER 24
/* The most the default VFS writes in one call: it masks a write's length to 17 bits. */
#define WALBUF_CAP 0x1ffff

typedef struct WalBuf {
  sqlite3_file base;
  sqlite3_file *real;      /* the default VFS's file, right after this struct */
  char *buf;               /* frames not passed on yet, from start on */
  int len;
  sqlite3_int64 start;
  char header[WALBUF_FRAME_HEADER];  /* a frame's header waiting for its page */
  int hasHeader;
  sqlite3_int64 headerAt;
  sqlite3_int64 end;       /* where SQLite's last write to the log ended */
} WalBuf;

static sqlite3_vfs walbufVfs;
static sqlite3_vfs *walbufReal;

/* walbufPass writes what p holds: its frames, then a header that waits. */
static int walbufPass(WalBuf *p){
  int rc = SQLITE_OK;
  if( p->len>0 ){
    rc = p->real->pMethods->xWrite(p->real, p->buf, p->len, p->start);
    p->len = 0;
    if( rc!=SQLITE_OK ){
      p->hasHeader = 0;
      return rc;
    }
  }
  if( p->hasHeader ){
    p->hasHeader = 0;
    rc = p->real->pMethods->xWrite(p->real, p->header, WALBUF_FRAME_HEADER, p->headerAt);
  }
  return rc;
}

static int walbufWrite(sqlite3_file *f, const void *z, int n, sqlite3_int64 at){
  WalBuf *p = (WalBuf*)f;
  int rc;
  /* A frame appended: its header comes where the last write ended. A checksum SQLite
  ** rewrites is a header alone, over a frame written earlier, and goes through. */
  if( n==WALBUF_FRAME_HEADER && !p->hasHeader && at==p->end ){
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
      rc = p->real->pMethods->xWrite(p->real, p->buf, p->len, p->start);
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
    return commit ? walbufPass(p) : SQLITE_OK;
  }
through:
  p->end = at+n;
  rc = walbufPass(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->real->pMethods->xWrite(p->real, z, n, at);
}

/* What a log holds when it is closed is never a commit's: each commit passes its
** frames on before it is synced. It can only be what a transaction rolled back after
** spilling frames left behind, past the end of the log, and is dropped: written now,
** after a checkpoint through another connection truncated the log, it would leave
** the log of a server that stopped cleanly not empty. */
static int walbufClose(sqlite3_file *f){
  WalBuf *p = (WalBuf*)f;
  int rc = p->real->pMethods->xClose(p->real);
  free(p->buf);
  p->buf = 0;
  return rc;
}

static int walbufRead(sqlite3_file *f, void *z, int n, sqlite3_int64 at){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPass(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->real->pMethods->xRead(p->real, z, n, at);
}

static int walbufTruncate(sqlite3_file *f, sqlite3_int64 size){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPass(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->real->pMethods->xTruncate(p->real, size);
}

static int walbufSync(sqlite3_file *f, int flags){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPass(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->real->pMethods->xSync(p->real, flags);
}

static int walbufFileSize(sqlite3_file *f, sqlite3_int64 *size){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPass(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->real->pMethods->xFileSize(p->real, size);
}

static int walbufFileControl(sqlite3_file *f, int op, void *arg){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPass(p);
  if( rc!=SQLITE_OK ) return rc;
  return p->real->pMethods->xFileControl(p->real, op, arg);
}

static int walbufFetch(sqlite3_file *f, sqlite3_int64 at, int n, void **pp){
  WalBuf *p = (WalBuf*)f;
  int rc = walbufPass(p);
  *pp = 0;
  if( rc!=SQLITE_OK ) return rc;
  if( p->real->pMethods->iVersion<3 ) return SQLITE_OK;  /* no map: SQLite reads instead */
  return p->real->pMethods->xFetch(p->real, at, n, pp);
}

static int walbufUnfetch(sqlite3_file *f, sqlite3_int64 at, void *ptr){
  WalBuf *p = (WalBuf*)f;
  if( p->real->pMethods->iVersion<3 ) return SQLITE_OK;
  return p->real->pMethods->xUnfetch(p->real, at, ptr);
}

static int walbufLock(sqlite3_file *f, int lock){
  WalBuf *p = (WalBuf*)f;
  return p->real->pMethods->xLock(p->real, lock);
}

static int walbufUnlock(sqlite3_file *f, int lock){
  WalBuf *p = (WalBuf*)f;
  return p->real->pMethods->xUnlock(p->real, lock);
}

static int walbufCheckReservedLock(sqlite3_file *f, int *out){
  WalBuf *p = (WalBuf*)f;
  return p->real->pMethods->xCheckReservedLock(p->real, out);
}

static int walbufSectorSize(sqlite3_file *f){
  WalBuf *p = (WalBuf*)f;
  return p->real->pMethods->xSectorSize(p->real);
}

static int walbufDeviceCharacteristics(sqlite3_file *f){
  WalBuf *p = (WalBuf*)f;
  return p->real->pMethods->xDeviceCharacteristics(p->real);
}

static int walbufShmMap(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp){
  WalBuf *p = (WalBuf*)f;
  if( p->real->pMethods->iVersion<2 ) return SQLITE_ERROR;
  return p->real->pMethods->xShmMap(p->real, pg, pgsz, extend, pp);
}

static int walbufShmLock(sqlite3_file *f, int offset, int n, int flags){
  WalBuf *p = (WalBuf*)f;
  if( p->real->pMethods->iVersion<2 ) return SQLITE_ERROR;
  return p->real->pMethods->xShmLock(p->real, offset, n, flags);
}

static void walbufShmBarrier(sqlite3_file *f){
  WalBuf *p = (WalBuf*)f;
  if( p->real->pMethods->iVersion>=2 ) p->real->pMethods->xShmBarrier(p->real);
}

static int walbufShmUnmap(sqlite3_file *f, int deleteFlag){
  WalBuf *p = (WalBuf*)f;
  if( p->real->pMethods->iVersion<2 ) return SQLITE_OK;
  return p->real->pMethods->xShmUnmap(p->real, deleteFlag);
}

static const sqlite3_io_methods walbufMethods = {
  3,
  walbufClose, walbufRead, walbufWrite, walbufTruncate, walbufSync, walbufFileSize,
  walbufLock, walbufUnlock, walbufCheckReservedLock, walbufFileControl,
  walbufSectorSize, walbufDeviceCharacteristics,
  walbufShmMap, walbufShmLock, walbufShmBarrier, walbufShmUnmap,
  walbufFetch, walbufUnfetch
};

/* walbufOpen opens every file as the default VFS does; the log's gets walbufMethods. */
static int walbufOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *outFlags){
  WalBuf *p;
  int rc;
  (void)vfs;
  if( (flags & SQLITE_OPEN_WAL)==0 ){
    return walbufReal->xOpen(walbufReal, name, f, flags, outFlags);
  }
  p = (WalBuf*)f;
  memset(p, 0, sizeof(*p));
  p->real = (sqlite3_file*)&p[1];
  rc = walbufReal->xOpen(walbufReal, name, p->real, flags, outFlags);
  p->base.pMethods = p->real->pMethods ? &walbufMethods : 0;
  return rc;
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
  walbufVfs.szOsFile = (int)sizeof(WalBuf) + real->szOsFile;
  walbufVfs.xOpen = walbufOpen;
  return sqlite3_vfs_register(&walbufVfs, 0);
}
