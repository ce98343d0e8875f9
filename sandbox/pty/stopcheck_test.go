package pty

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestStopIsVerified: a stop message the launcher's check does not confirm
// (the agent runs on: a faked "stopped") leaves the launcher running, and
// the jail's half is told to continue all the same; a confirmed one
// suspends it. The user's terminal and the agent's are host ptys here; the
// test plays the jail's half of the control socket.
func TestStopIsVerified(t *testing.T) {
	var stops atomic.Int32
	saved := stopSelf
	stopSelf = func() { stops.Add(1) }
	t.Cleanup(func() { stopSelf = saved })
	for _, confirmed := range []bool{false, true} {
		stops.Store(0)
		um, us, err := openPTY()
		if err != nil {
			t.Fatal(err)
		}
		am, as, err := openPTY()
		if err != nil {
			t.Fatal(err)
		}
		host, jail, err := NewControl()
		if err != nil {
			t.Fatal(err)
		}
		asked := make(chan struct{}, 4)
		term, err := AttachChecked(host, us, us, func(int) bool { asked <- struct{}{}; return confirmed })
		if err != nil {
			t.Fatal(err)
		}
		mfd, _ := fdOf(am)
		if err := send(jail, []byte{msgMaster}, mfd); err != nil {
			t.Fatal(err)
		}
		if err := send(jail, []byte{msgStopped}, -1); err != nil {
			t.Fatal(err)
		}
		answer := make(chan []byte, 1)
		go func() { b, _, _ := recv(jail); answer <- b }()
		select {
		case b := <-answer:
			if len(b) != 1 || b[0] != msgContinue {
				t.Errorf("confirmed %v: the launcher answered %q, want 'C'", confirmed, b)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("confirmed %v: the launcher never answered the stop", confirmed)
		}
		select {
		case <-asked:
		default:
			t.Errorf("confirmed %v: the launcher took the stop without checking it", confirmed)
		}
		want := int32(0)
		if confirmed {
			want = 1
		}
		if got := stops.Load(); got != want {
			t.Errorf("confirmed %v: the launcher stopped itself %d times, want %d", confirmed, got, want)
		}
		jail.Close()
		term.Close()
		as.Close()
		um.Close()
		us.Close()
	}
}
