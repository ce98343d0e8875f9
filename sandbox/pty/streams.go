package pty

import (
	"bufio"
	"io"
	"os"
	"sync"
	"time"

	"github.com/cco-dev/cco/internal/safetext"
)

// Streams are the jail's standard streams. No process in the jail may hold
// the user's terminal: through it, it could read the user's keys, or
// write to the terminal after the session. So a stream that is a terminal
// is replaced by a pipe that the launcher relays:
//
//   - on the agent's own terminal (Attach), bwrap's stdin and stdout are
//     /dev/null, and its stderr, which then carries only bwrap's and the
//     helper's messages, is relayed with every control byte escaped;
//   - otherwise the agent's output is relayed as it is written, and its
//     input from the terminal as the user types it.
//
// A stream that is no terminal (a file, a pipe) is passed as it is.
type Streams struct {
	// Child are bwrap's descriptors 0, 1 and 2.
	Child [3]*os.File
	// own are the Child files the launcher made and closes after the fork.
	own    []*os.File
	start  []func()
	output sync.WaitGroup
	stopIn func()
	inDone chan struct{}
}

// JailStreams decides the jail's streams for the user's in, out and errf;
// terminal says the agent runs on its own terminal (Attach).
func JailStreams(in, out, errf *os.File, terminal bool) (*Streams, error) {
	s := &Streams{Child: [3]*os.File{in, out, errf}}
	if terminal {
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		s.own = append(s.own, null)
		s.Child[0], s.Child[1] = null, null
		if IsTerminal(errf) {
			if err := s.relayOut(2, errf, true); err != nil {
				s.Close()
				return nil, err
			}
		}
		return s, nil
	}
	for i, f := range []*os.File{out, errf} {
		if IsTerminal(f) {
			if err := s.relayOut(i+1, f, false); err != nil {
				s.Close()
				return nil, err
			}
		}
	}
	if IsTerminal(in) {
		r, w, err := os.Pipe()
		if err != nil {
			s.Close()
			return nil, err
		}
		s.own = append(s.own, r)
		s.Child[0] = r
		s.start = append(s.start, func() {
			infd, err := fdOf(in)
			if err != nil {
				w.Close()
				return
			}
			stop, done, err := relayInput(infd, w)
			if err != nil {
				w.Close()
				return
			}
			s.stopIn, s.inDone = func() { stop(); w.Close() }, done
		})
	}
	return s, nil
}

// relayOut makes Child[n] a pipe whose output goes to to, escaped line by
// line when escape is set.
func (s *Streams) relayOut(n int, to *os.File, escape bool) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	s.own = append(s.own, w)
	s.Child[n] = w
	s.start = append(s.start, func() {
		s.output.Add(1)
		go func() {
			defer s.output.Done()
			defer r.Close()
			if !escape {
				_, _ = io.Copy(to, r)
				return
			}
			br := bufio.NewReader(r)
			for {
				line, err := br.ReadString('\n')
				if line != "" {
					_, _ = io.WriteString(to, safetext.Lines(line))
				}
				if err != nil {
					return
				}
			}
		}()
	})
	return nil
}

// Started closes the launcher's copies of the child's ends (bwrap holds
// them now) and starts the relays.
func (s *Streams) Started() {
	s.Close()
	for _, f := range s.start {
		f()
	}
}

// Close closes the child's ends that the launcher made.
func (s *Streams) Close() {
	for _, f := range s.own {
		f.Close()
	}
	s.own = nil
}

// Wait, once the jail has ended, stops relaying input and waits for the
// output relays to drain (bounded: a process the agent left behind may hold
// a pipe open).
func (s *Streams) Wait() {
	if s.stopIn != nil {
		s.stopIn()
		<-s.inDone
	}
	done := make(chan struct{})
	go func() {
		s.output.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainTimeout):
	}
}
