package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hookdedup/hookdedup/storage"
)

// runBackup writes a consistent copy of the database to FILE, while serve runs.
func runBackup(ctx context.Context, args []string, e env) error {
	flags := newFlags("backup", e)
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: hookdedup backup FILE")
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	// Opening creates a missing database: a backup of nothing is a mistake worth saying.
	if _, err := os.Stat(cfg.Database); err != nil {
		return fmt.Errorf("backup: database %s: %w", cfg.Database, err)
	}
	db, err := cfg.openDB(nil)
	if err != nil {
		return err
	}
	defer db.Close()
	info, err := db.Backup(ctx, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "backed up %s to %s: %d deliveries, %d keys, %d bytes\n",
		cfg.Database, info.Path, info.Deliveries, info.Claims, info.Bytes)
	return nil
}

// runRestore replaces the database with the backup FILE. It refuses while any process
// (serve, or another command) has the database open.
func runRestore(ctx context.Context, args []string, e env) error {
	flags := newFlags("restore", e)
	pos, err := flags.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: hookdedup restore FILE")
	}
	cfg, err := flags.load(e)
	if err != nil {
		return err
	}
	info, err := storage.Restore(ctx, pos[0], cfg.Database)
	if errors.Is(err, storage.ErrInUse) {
		return fmt.Errorf("restore: %s is open in another process: stop serve (and any other hookdedup command using it), then restore", cfg.Database)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "restored %s from %s: %d deliveries, %d keys\n", info.Path, pos[0], info.Deliveries, info.Claims)
	if info.Previous != "" {
		fmt.Fprintf(e.stdout, "the database it replaced is kept as %s\n", info.Previous)
	}
	return nil
}
