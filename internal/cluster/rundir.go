package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// The run directory holds what other users of the machine must not read or
// change: the state file (the Redis password, the admin token, the pids Down
// signals), the secret files the processes read, and the logs. So it is the
// caller's own: made 0700, and an existing one is refused when it is a
// symbolic link (whoever made the link chooses where all that goes), is
// another user's (who could read the secrets, or plant a state file whose
// pids Down would signal), or is writable by others (who could swap its
// files). A shared /tmp lets anyone create /tmp/NAME first: this is what
// catches it.

// checkRunDir says why dir cannot be the run directory, or nil; an error
// wrapping fs.ErrNotExist when there is nothing at dir.
func checkRunDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	refuse := func(why, fix string) error {
		return fmt.Errorf("cluster: run directory %s %s: refusing it (it holds the cluster's secrets, logs and pids); %s", dir, why, fix)
	}
	switch st, ok := fi.Sys().(*syscall.Stat_t); {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(dir)
		return refuse("is a symbolic link (to "+target+")", "remove the link or choose another RUN_DIR")
	case !fi.IsDir():
		return refuse("is not a directory", "choose another RUN_DIR")
	case ok && int(st.Uid) != os.Geteuid():
		return refuse(fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid()), "choose another RUN_DIR")
	case fi.Mode().Perm()&0o022 != 0:
		return refuse(fmt.Sprintf("is writable by other users (mode %04o)", fi.Mode().Perm()), "chmod go-w it or choose another RUN_DIR")
	}
	return nil
}

// prepareRunDir makes dir (and its missing parents) 0700, or checks the one
// there and takes group's and others' access away from it (logs of an older
// version of the cluster may be readable in it: Proc.start makes each private
// again as it opens it).
func prepareRunDir(dir string) error {
	err := checkRunDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("cluster: run directory: %w", err)
		}
		err = checkRunDir(dir) // what is there now, whoever made it
	}
	if err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("cluster: run directory: %w", err)
	}
	return nil
}

// writePrivate writes data to path, readable and writable by its owner only,
// whatever mode a file already there had: made private before a byte of
// data is in it.
func writePrivate(path string, data []byte) error {
	f, err := openPrivate(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// openPrivate opens path with flag, made 0600 (a file from before keeps its
// mode at open: it is changed).
func openPrivate(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return f, nil
}
