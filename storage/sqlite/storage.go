package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookdedup/hookdedup/storage"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// connector opens connections of go-sqlite3 to one DSN and sets on each the
// per-connection settings that its DSN cannot carry. A connector of its own per DB (not
// a driver registered once) lets those settings come from Options.
type connector struct {
	dsn    string
	driver *sqlite3.SQLiteDriver
}

func newConnector(dsn string, pragmas []string) *connector {
	return &connector{dsn: dsn, driver: &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		for _, pragma := range pragmas {
			if _, err := c.Exec(pragma, nil); err != nil {
				return fmt.Errorf("%s: %w", pragma, err)
			}
		}
		return nil
	}}}
}

func (c *connector) Connect(context.Context) (driver.Conn, error) { return c.driver.Open(c.dsn) }
func (c *connector) Driver() driver.Driver                        { return c.driver }

// connPragmas are the settings of every connection of a DB opened with opt.
func connPragmas(opt Options) []string {
	return []string{
		// Statement journals in memory, not in temporary files: every multi-row
		// INSERT of the writer opens one (a later row could abort it), and on disk
		// that was three page writes per delivery, more than the WAL's own.
		"PRAGMA temp_store = MEMORY",
		// See checkpoint.go.
		fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", fallbackCheckpointPages),
		fmt.Sprintf("PRAGMA journal_size_limit = %d", walSizeLimit),
		// See Options.CacheSize and Options.MmapSize. A negative cache_size is in KiB.
		fmt.Sprintf("PRAGMA cache_size = %d", -opt.CacheSize/1024),
		fmt.Sprintf("PRAGMA mmap_size = %d", max(opt.MmapSize, 0)),
	}
}

// writerCacheSize bounds the page cache of the write connection, in bytes, while the
// database file is under bigFileSize. SQLite then walks every page of the writer's cache
// at the end of each transaction that split an index page out of order (the split moves
// a page through the page number of the lock byte's page, at 1 GiB, and the commit drops
// every cached page above the file's end by looking at each): with the whole default
// cache filled, that walk took 9 % of the server's CPU under load. Bounded to this size
// it takes 2 %, and the pages the writer no longer keeps are read again through the
// memory map, a copy, at a cost that did not show. A file past that page has no such
// walk, and its writer gets the whole cache back (growWriterCache): its indexes' leaves
// are many and scattered, and the writer would read them again out of the WAL.
const writerCacheSize int64 = 8 << 20

// bigFileSize is where the lock byte's page lies (SQLite's PENDING_BYTE): a database file
// larger than that never has the writer's cache walked at a commit.
var bigFileSize int64 = 1 << 30

// writerCheckEvery is how many batches the writer commits between two looks at the
// file's size (growWriterCache).
var writerCheckEvery = 1024

// writeStmtCache is how many prepared statements the write connection keeps, found by
// their text: the writer's and the forensic checks' (some seventy, most of them for
// each chunk size) and the other writes', with room to spare so that a sweep's or the
// console's statements do not push the writer's out.
const writeStmtCache = 256

// writeConnector is the write pool's connector: every connection's settings, with the
// page cache bounded by writerCacheSize until full says the file has outgrown the bound.
func writeConnector(dsn string, opt Options, full *atomic.Bool) *connector {
	all := connPragmas(opt)
	bounded := opt
	bounded.CacheSize = min(opt.CacheSize, writerCacheSize)
	small := connPragmas(bounded)
	return &connector{dsn: dsn, driver: &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		pragmas := small
		if full.Load() {
			pragmas = all
		}
		for _, pragma := range pragmas {
			if _, err := c.Exec(pragma, nil); err != nil {
				return fmt.Errorf("%s: %w", pragma, err)
			}
		}
		return nil
	}}}
}

// growWriterCache gives the write connection the whole page cache once the database file
// is larger than bigFileSize. The writer calls it between batches, when the connection
// is free.
func (db *DB) growWriterCache() {
	if db.writerFull.Load() {
		return
	}
	fi, err := db.file.Stat()
	if err != nil || fi.Size() <= db.bigFile {
		return
	}
	db.writerFull.Store(true)
	// A failure leaves the bounded cache, which is correct, only slower at this size.
	db.write.Exec(fmt.Sprintf("PRAGMA cache_size = %d", -db.cacheSize/1024))
}

//go:embed migrations/*.sql
var migrations embed.FS

// Options tunes Open. The zero value is the production default.
type Options struct {
	// BusyTimeout is how long a write waits for a lock held by another process before it
	// fails. Default 5s.
	BusyTimeout time.Duration
	// Synchronous is SQLite's synchronous setting under WAL: "FULL" (default) keeps every
	// committed transaction across a power cut; "NORMAL" may lose the last ones then (never
	// on a process crash) and saves an fsync per commit.
	Synchronous string
	// MaxBatch bounds how many intake writes share one transaction. Default 256.
	MaxBatch int
	// Logger receives what the caller of a method cannot be told: that the database
	// file left its path (file.go), or that other users can read it (private.go).
	// Default: nothing is logged.
	Logger *slog.Logger
	// CacheSize is the page cache of each connection, in bytes: the pages it keeps
	// between transactions, dirty ones included, without asking the file system.
	// The write connection keeps 8 MiB at most while the file is under 1 GiB
	// (writerCacheSize). Default DefaultCacheSize.
	CacheSize int64
	// MmapSize is how much of the database file SQLite reads through a memory map, in
	// bytes, instead of copying each page it reads out of the file system's cache; the
	// map is shared by every connection and costs address space, not memory of the
	// process's own. Default DefaultMmapSize; negative turns the map off.
	MmapSize int64
	// NoReadAhead keeps Open from reading the claims' key index ahead of deliveries in a
	// large file (warm.go): for a command that opens the database for a moment, to read
	// or change a few rows, and would only wait for that read to stop as it closes.
	NoReadAhead bool
	// MustExist makes Open fail with ErrNoDatabase, creating nothing, when there is no
	// database file at the path. Without it Open creates the file (and its missing
	// directories), private to its user.
	MustExist bool
	// ServeLock makes this Open the database's one serve: it holds the lock file beside
	// the database (ServeLockSuffix) until Close, and fails with an error wrapping
	// ErrServed, before it touches the database, while another process holds it. Other
	// opens (the commands an operator runs while serve runs) do not look at it.
	ServeLock bool
}

// The defaults of Options.CacheSize and Options.MmapSize. Every new key lands on a leaf
// page of its claim's and its delivery's key-ordered indexes that no recent key
// touched: with SQLite's 2 MiB page cache and no map, each of those pages was read
// again through a system call, and throughput at a million keys stored fell to half of
// an empty database's. The map covers the whole file: past it, a console filter that
// looks at each row of its window read those pages cold through a system call and a
// copy each, 142 ms at 5 M deliveries. SQLite maps at most what it was compiled to
// allow (SQLITE_MAX_MMAP_SIZE: just under 2 GiB in go-sqlite3's build, 1 TiB as the
// Makefile builds it).
const (
	DefaultCacheSize int64 = 64 << 20
	DefaultMmapSize  int64 = 1 << 40
)

// MinCacheSize and MaxCacheSize bound Options.CacheSize. SQLite takes the cache in KiB,
// in a 32-bit integer: less than a KiB, or more than it holds, would silently be no
// cache at all.
const (
	MinCacheSize int64 = 1 << 10
	MaxCacheSize int64 = 1 << 41
)

// DB is a hookdedup database. Its methods are safe for concurrent use. A method that
// writes returns an error wrapping ErrFileGone once the database file has left its path
// (what it wrote, if anything, will not be found), and one wrapping ErrWriteTimeout
// when it could not write within the busy timeout of its call (write.go).
type DB struct {
	// Now is the clock every method uses; tests replace it to move time.
	Now func() time.Time

	path  string
	write *sql.DB // one connection: SQLite has one writer, and one pool queues our own writers without busy waits
	read  *sql.DB // several connections: WAL readers never block the writer
	cp    *sql.DB // the checkpointer's connection (checkpoint.go)

	reqs       chan *recordReq
	maxBatch   int
	closeOnce  sync.Once
	closeErr   error // what the one Close found; later calls return it again
	closing    chan struct{}
	writerDone chan struct{}

	committed        chan struct{}
	checkpointerDone chan struct{}
	file             *os.File     // the database file, for the checkpointer's fsync
	walRestart       atomic.Bool  // the checkpointer has caught up: the writer may finish (checkpoint.go)
	walRestarts      atomic.Int64 // finishCheckpoint's passes that reached the end of the WAL
	cpPasses         atomic.Int64 // the checkpointer's passes that copied pages
	cpFsyncs         atomic.Int64 // the checkpointer's fsyncs of the database file before a final pass (checkpoint.go)
	cpFallbacks      atomic.Int64 // its passes whose writes it could not start, and fsynced instead (writeBack)
	batches          atomic.Int64 // the writer's batches, committed or not
	batchRows        atomic.Int64 // the deliveries those batches held
	keyFilters       atomic.Int64 // filters of forensic keys the writer took into use (keyfilter.go)
	traced           tracedKeys   // traces the sweep wrote on the write connection, for the writer's filter (keyfilter.go)

	startWriteBack func(fd int) error // the package's startWriteBack when Open ran (checkpoint.go)
	fdatasyncFile  func(fd int) error // and its fdatasyncFile

	totals pendingTotals // what the writer stored, for the roll-ups to fold (totals.go)

	busyTimeout time.Duration // every write's bound on its whole wait (record.go, write.go)
	cacheSize   int64         // Options.CacheSize
	writerFull  *atomic.Bool  // the write connection has the whole cache (growWriterCache)
	bigFile     int64         // bigFileSize, as Open found it
	checkEvery  int           // writerCheckEvery, as Open found it
	log         *slog.Logger
	fileInfo    os.FileInfo                    // the open database file, for os.SameFile (file.go)
	gone        atomic.Pointer[error]          // set once the file is no longer at path
	sides       [len(sideSuffixes)]os.FileInfo // the -wal and -shm in use, nil if none (file.go)
	watcherDone chan struct{}
	warmDone    chan struct{} // warmKeys has ended, or was never started (warm.go)
	warmReads   atomic.Int64  // the reads warmKeys made

	auditMark storage.AuditMark // how far AuditChain has checked the audit chain (auditchain.go)
	bulkWake  chan struct{}     // a bulk action became ready to run (bulk.go)

	served *os.File // holds the serve lock (Options.ServeLock), nil without it

	moneyRead func() // tests: runs once a reprocess has read its keys' money (release.go)
}

// Open opens (creating if needed, unless opt.MustExist) the database file at path and
// brings its schema up to date. A file it creates is 0600 and so are SQLite's -wal and
// -shm beside it; a directory it creates is 0700. Returns an error wrapping
// ErrNoDatabase when opt.MustExist and there is no file at path. Writes through Record
// are group-committed by one background writer until Close.
func Open(path string, opt Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: empty path")
	}
	if opt.BusyTimeout <= 0 {
		opt.BusyTimeout = 5 * time.Second
	}
	switch strings.ToUpper(opt.Synchronous) {
	case "":
		opt.Synchronous = "FULL"
	case "FULL", "NORMAL":
		opt.Synchronous = strings.ToUpper(opt.Synchronous)
	default:
		return nil, fmt.Errorf("open database: synchronous must be FULL or NORMAL, not %q", opt.Synchronous)
	}
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 256
	}
	if opt.CacheSize <= 0 {
		opt.CacheSize = DefaultCacheSize
	}
	if opt.CacheSize < MinCacheSize || opt.CacheSize > MaxCacheSize {
		return nil, fmt.Errorf("open database: cache_size %d is not a number of bytes from %d to %d", opt.CacheSize, MinCacheSize, MaxCacheSize)
	}
	if opt.MmapSize == 0 {
		opt.MmapSize = DefaultMmapSize
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	// Pragmas go in the DSN: a PRAGMA sent through Exec reaches one pooled connection only.
	params := url.Values{}
	params.Set("_journal_mode", "WAL")
	params.Set("_busy_timeout", fmt.Sprint(opt.BusyTimeout.Milliseconds()))
	params.Set("_foreign_keys", "on")
	params.Set("_synchronous", opt.Synchronous)
	params.Set("_txlock", "immediate")
	dropAliasedKeptAside(path)
	// Before anything opens it, which would make a log beside this name.
	if err := refuseNotAFile(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := refuseSecondNames(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if opt.MustExist {
		// SQLite itself refuses to create the file, so that a file missing now or
		// removed in the next instant is never replaced by an empty database.
		params.Set("mode", "rw")
		if missing(path) {
			return nil, fmt.Errorf("open database %s: %w", path, storage.ErrNoDatabase)
		}
	} else if err := refuseStrayLog(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	} else if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	} else {
		// The file exists now. No connection may make one: the pools open connections
		// later too, and one opened after the file was removed would leave an empty
		// database at the path.
		params.Set("mode", "rw")
	}
	// Before the serve lock, which would leave its file beside it, and the first
	// connection that may write, which would set even another application's file to
	// WAL mode.
	if err := refuseOtherApplicationFile(context.Background(), path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	var served *os.File
	if opt.ServeLock {
		var err error
		if served, err = lockServe(path); err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, err)
		}
	}
	opened := false
	defer func() {
		if !opened && served != nil {
			served.Close()
		}
	}()
	// Before this process connects to the file: InUse opens and closes the file's -shm,
	// and closing any descriptor of a file drops every lock the process holds on it,
	// SQLite's own included, after which other processes would take the database for
	// unused.
	if err := upgradeInUse(context.Background(), path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	dsn := fileURI(path) + "?" + params.Encode()

	pragmas := connPragmas(opt)
	writerFull, bigFile := new(atomic.Bool), bigFileSize
	if fi, err := os.Stat(path); err == nil && fi.Size() > bigFile {
		writerFull.Store(true)
	}
	// The writer hands each commit's log frames to the kernel in one write (walbuf.c).
	if err := registerWalbuf(); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	write := sql.OpenDB(writeConnector(dsn+"&vfs="+walbufVFS+"&_stmt_cache_size="+fmt.Sprint(writeStmtCache), opt, writerFull))
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	db := &DB{
		Now:        time.Now,
		path:       path,
		write:      write,
		reqs:       make(chan *recordReq, 4*opt.MaxBatch),
		maxBatch:   opt.MaxBatch,
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),

		committed:        make(chan struct{}, 1),
		checkpointerDone: make(chan struct{}),
		startWriteBack:   startWriteBack,
		fdatasyncFile:    fdatasyncFile,

		busyTimeout: opt.BusyTimeout,
		cacheSize:   opt.CacheSize,
		writerFull:  writerFull,
		bigFile:     bigFile,
		checkEvery:  writerCheckEvery,
		log:         opt.Logger.With("component", "storage"),
		watcherDone: make(chan struct{}),
		warmDone:    make(chan struct{}),
		bulkWake:    make(chan struct{}, 1),
		served:      served,
	}
	if err := db.migrate(context.Background()); err != nil {
		write.Close()
		if opt.MustExist && missing(path) {
			err = storage.ErrNoDatabase // removed since the look above
		}
		return nil, fmt.Errorf("open database %s: %w", path, unwritableDir(path, err))
	}
	warnShared(db.log, path)
	read := sql.OpenDB(newConnector(dsn+"&_query_only=1", pragmas))
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	db.read = read
	cp := sql.OpenDB(newConnector(dsn, pragmas))
	cp.SetMaxOpenConns(1)
	cp.SetMaxIdleConns(1)
	db.cp = cp
	// A descriptor of its own for the checkpointer's fsync, open as long as SQLite's
	// connections are (see Close).
	f, err := os.Open(path)
	if err != nil {
		cp.Close()
		read.Close()
		write.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db.file = f
	if db.fileInfo, err = f.Stat(); err != nil {
		f.Close()
		cp.Close()
		read.Close()
		write.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// The first connection made them (migrate wrote through it), and it stays open.
	db.noteSideFiles()
	go db.writer()
	go db.checkpointer()
	go db.watchFile()
	if db.fileInfo.Size() > bigFile && !opt.NoReadAhead {
		go db.warmKeys()
	} else {
		close(db.warmDone)
	}
	opened = true
	return db, nil
}

// unwritableDir is err, an open's failure, told as what it is when the database's
// directory cannot be written: SQLite creates or opens for writing the -wal and -shm of
// a WAL database beside it, even to read it, and when it cannot, says "unable to open
// database file: no such file or directory" or "attempt to write a readonly database" of
// a file that is there (on a read-only mount, in a directory of another user).
func unwritableDir(path string, err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) || (se.Code != sqlite3.ErrCantOpen && se.Code != sqlite3.ErrReadonly) {
		return err
	}
	path = resolved(path) // SQLite writes the -wal and -shm beside the file a link leads to
	dir := filepath.Dir(path)
	why := syscall.Access(dir, 2 /* W_OK */)
	if why == nil {
		return err
	}
	what := "the database"
	if log, _ := heldLog(path); log != "" {
		what += " with its " + filepath.Base(log) // a copy without it would lack its last commits
	}
	advice := "copy " + what + " to a directory you may write, or run as a user who may write to this one"
	if errors.Is(why, syscall.EROFS) {
		advice = "copy " + what + " to a writable file system"
	}
	return unwritableDirError{err: err, msg: fmt.Sprintf("its directory %s is not writable (%v): SQLite must write %s-wal and -shm there, "+
		"even to read the database; %s", dir, why, filepath.Base(path), advice)}
}

// unwritableDirError says why an open failed (unwritableDir) instead of SQLite's
// words, which would mislead; SQLite's error stays underneath, for errors.Is and
// errors.As.
type unwritableDirError struct {
	err error
	msg string
}

func (e unwritableDirError) Error() string { return e.msg }
func (e unwritableDirError) Unwrap() error { return e.err }

// Path is the database file's path.
func (db *DB) Path() string { return db.path }

// Close waits for queued writes to commit, then closes the database cleanly. If the
// database file has left its path (ErrFileGone), the -wal and -shm it used are renamed
// aside first (to <name>.orphaned-<time>, and logged), so that they are never applied
// to the file now at the path. Closing again does nothing and returns what the first
// Close returned.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		close(db.closing)
		<-db.writerDone
		<-db.checkpointerDone
		<-db.watcherDone
		<-db.warmDone
		db.setSideFilesAside()
		// The write connection closes last: the last connection to close checkpoints the
		// whole WAL into the database file and removes it.
		err := errors.Join(db.cp.Close(), db.read.Close(), db.write.Close())
		// Only now: closing any descriptor of the file drops the locks SQLite holds on it.
		db.closeErr = errors.Join(err, db.file.Close())
		if db.served != nil {
			db.served.Close() // the next serve may open it once the database is closed
		}
	})
	return db.closeErr
}

// Ping reports whether the database can commit a write now, into the file at its path
// (readiness). Returns an error wrapping ErrFileGone once that file is not the open one.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.checkFile(); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	// A full disk first: a small write can still commit into WAL space allocated
	// earlier (the WAL starts over at its beginning) while deliveries are refused.
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(db.path), &st); err == nil {
		if free := st.Bavail * uint64(st.Bsize); free < minFreeBytes {
			return fmt.Errorf("ping database: %d bytes free on its file system, under %d", free, minFreeBytes)
		}
	}
	// The same for a file size limit (RLIMIT_FSIZE) that the files have nearly reached.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err == nil && lim.Cur != math.MaxUint64 {
		for _, name := range []string{db.path, db.path + "-wal"} {
			if fi, err := os.Stat(name); err == nil && uint64(fi.Size())+minFreeBytes > lim.Cur {
				return fmt.Errorf("ping database: %s is %d bytes, within %d of the file size limit %d",
					name, fi.Size(), minFreeBytes, lim.Cur)
			}
		}
	}
	_, err := db.writeExec(ctx,
		`INSERT INTO settings(name, value) VALUES('readyz', ?)
		 ON CONFLICT(name) DO UPDATE SET value = excluded.value`, db.now())
	if err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// minFreeBytes is the room on the database's file system below which Ping fails: about
// what one delivery at the default body limit and its WAL pages take.
const minFreeBytes = 1 << 20

func (db *DB) now() int64 { return db.Now().UnixMilli() }

// upgradeInUse refuses to open a database of an earlier schema that another process has
// open (an earlier version's serve, during an upgrade): migrated under it, it would run
// on a schema it does not know, and could not start again on it. A new database, or one
// this build's schema, is not looked at further.
func upgradeInUse(ctx context.Context, path string) error {
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil
	}
	pending, _, applied, err := pendingMigrations(ctx, path)
	if err != nil || len(pending) == 0 || applied == 0 {
		return nil // what is wrong with the file, Open's migration says
	}
	if busy, err := InUse(path); err != nil {
		return err
	} else if busy {
		return storage.UpgradeInUseError(pending)
	}
	return nil
}

// migrate runs each embedded migration not yet recorded, each in its own transaction.
func (db *DB) migrate(ctx context.Context) error {
	if _, err := db.write.ExecContext(ctx,
		`CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	// A database a newer version migrated is refused: this one would skip the upkeep
	// its schema asks for (the suspects' running totals, for one) and leave it wrong.
	rows, err := db.write.QueryContext(ctx, `SELECT name FROM migrations ORDER BY name`)
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	var unknown []string
	applied := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return fmt.Errorf("read applied migrations: %w", err)
		}
		applied[name] = true
		if !slices.Contains(names, name) {
			unknown = append(unknown, name)
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	if len(unknown) > 0 {
		return storage.NewerSchemaError(unknown)
	}
	for _, name := range names {
		if applied[name] {
			continue
		}
		if err := db.migrateOne(ctx, name); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
	}
	return nil
}

// UnknownMigrations returns the migrations the database records that this build does
// not have, in order.
func (db *DB) UnknownMigrations(ctx context.Context) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT name FROM migrations ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	defer rows.Close()
	var unknown []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		if _, err := fs.Stat(migrations, name); err != nil {
			unknown = append(unknown, name)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	return unknown, nil
}

func (db *DB) migrateOne(ctx context.Context, name string) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM migrations WHERE name = ?`, name).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	body, err := fs.ReadFile(migrations, name)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return err
	}
	if step := migrationSteps[name]; step != nil {
		if err := step(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO migrations(name, applied_at) VALUES(?, ?)`, name, db.now()); err != nil {
		return err
	}
	return tx.Commit()
}

// migrationSteps are the steps of migrations that SQL cannot take, each run after its
// migration's SQL, in its transaction.
var migrationSteps = map[string]func(context.Context, *sql.Tx) error{
	"migrations/0016_audit_chain.sql":     chainAuditLog,
	"migrations/0039_money_magnitude.sql": countMagnitudes,
	"migrations/0040_stats_minor.sql":     countStatsMinor,
	"migrations/0042_ids_not_reused.sql":  seedIDs,
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// nullMillis maps an absent time to SQL NULL.
func nullMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// DB is a storage engine: the contract is package storage's.
var _ storage.Store = (*DB)(nil)

// Clock returns the time every method takes for now.
func (db *DB) Clock() time.Time { return db.Now() }
