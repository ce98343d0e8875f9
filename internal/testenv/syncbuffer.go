package testenv

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that goroutines may write to concurrently,
// for a test that reads what connections or processes logged.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
