package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// freezeTimeout bounds how long freeze waits for a process to stop.
const freezeTimeout = 10 * time.Second

// freeze stops the process group led by pid (SIGSTOP) and returns once
// every thread of pid is stopped. kill(2) returns before that: the kernel
// wakes one thread to take the signal and that thread stops the others,
// so on a busy machine the rest can go on serving (answer a request the
// caller sends right after) for milliseconds. A partition that is only
// requested would let a test see an agent answer "while partitioned".
func freeze(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP to process group %d: %w", pid, err)
	}
	deadline := time.Now().Add(freezeTimeout)
	for {
		running, err := runningThreads(pid)
		if err != nil {
			return err
		}
		if len(running) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d: threads %v not stopped %v after SIGSTOP", pid, running, freezeTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// thaw lets the process group led by pid run again.
func thaw(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT to process group %d: %w", pid, err)
	}
	return nil
}

// runningThreads lists the threads of pid that are not stopped (state T
// in /proc/PID/task/TID/stat). A process that is gone or a zombie has
// none: nothing of it can answer.
func runningThreads(pid int) ([]string, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var running []string
	for _, tid := range tids {
		stat, err := os.ReadFile(filepath.Join(dir, tid.Name(), "stat"))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // the thread exited
		}
		if err != nil {
			return nil, err
		}
		// "tid (comm) S ...": comm may hold spaces and parentheses, the
		// state follows the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			return nil, fmt.Errorf("%s/%s/stat: unexpected %q", dir, tid.Name(), s)
		}
		switch s[i+2] {
		case 'T', 'Z', 'X':
		default:
			running = append(running, tid.Name()+":"+string(s[i+2]))
		}
	}
	return running, nil
}
