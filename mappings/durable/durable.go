// Package durable writes small files that survive a crash: the helpers of the
// stores under dataDir (fsblobs) and of the member node's replication jobs.
package durable

import (
	"fmt"
	"os"
	"path/filepath"
)

// TempPrefix starts the names of WriteFile's temporary files, so that a reader
// of the directory can tell (and remove) what a crash left.
const TempPrefix = ".tmp-"

// WriteFile writes data to path atomically and durably: into a temporary file
// in the same directory, fsynced, renamed over path, and the directory fsynced.
// A reader sees the old file or the whole new one, and once WriteFile returns
// nil the new one survives a crash. On error the temporary file is gone; path
// holds the old content, or the new one when only the last sync failed.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// Remove removes path durably; a missing file is not an error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes the entries of dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
