package supervise

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"time"
)

// Status reads bwrap's --json-status-fd stream: a child-pid line once
// bwrap has started the jail's first process, and an exit-code line only if
// the command ran (a jail that fails to build ends the stream without one).
type Status struct {
	f  *os.File
	sc *bufio.Scanner
}

// ChildPIDLine and ExitCodeLine are the stream's two lines, as bwrap
// writes them: cco's engine writes the first, the jail's pid 1 the second.
func ChildPIDLine(pid int) string { return "{ \"child-pid\": " + strconv.Itoa(pid) + " }\n" }

// ExitCodeLine says that the command ran and how it ended.
func ExitCodeLine(code int) string { return "{ \"exit-code\": " + strconv.Itoa(code) + " }\n" }

// NewStatus reads the stream from f (the pipe's read end).
func NewStatus(f *os.File) *Status { return &Status{f: f, sc: bufio.NewScanner(f)} }

// ChildPID reads up to the child-pid line; 0 means the stream ended first
// (bwrap failed).
func (j *Status) ChildPID() int {
	for j.sc.Scan() {
		l := j.sc.Bytes()
		if i := bytes.Index(l, []byte(`"child-pid":`)); i >= 0 {
			rest := bytes.TrimLeft(l[i+len(`"child-pid":`):], " ")
			n := 0
			for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
				n++
			}
			if pid, err := strconv.Atoi(string(rest[:n])); err == nil && pid > 0 {
				return pid
			}
		}
	}
	return 0
}

// Ran reports, once bwrap has exited, whether the command ran: bwrap wrote
// its exit-code line before it exited, so the line is read at once; the
// deadline only bounds a stream that a jail's stray process holds open.
func (j *Status) Ran() bool {
	j.f.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	for j.sc.Scan() {
		if bytes.Contains(j.sc.Bytes(), []byte(`"exit-code":`)) {
			return true
		}
	}
	return false
}
