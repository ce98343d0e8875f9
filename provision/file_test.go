package provision

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

const toolPath = "/usr/local/bin/tool"

var (
	toolV1 = []byte("#!/bin/sh\necho v1\n")
	toolV2 = []byte("#!/bin/sh\necho version two\n")
)

func toolStep() *File {
	uid, gid := owner()
	return &File{StepID: "test.tool", StepName: "install the tool", Path: toolPath, Mode: 0o755, UID: uid, GID: gid, Content: toolV1}
}

// checkOnly runs the step's Check in a fresh run, as a dry run does.
func checkOnly(t *testing.T, r *Root, s Step) Check {
	t.Helper()
	run := newRun(t, r)
	run.DryRun = true
	c, err := s.Check(run.ReadOnly())
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return c
}

func install(t *testing.T, r *Root, s Step) {
	t.Helper()
	wantStatuses(t, execute(t, r, nil, s), StatusChanged)
}

func receiptBytes(t *testing.T, r *Root) []byte {
	t.Helper()
	b, err := os.ReadFile(r.HostPath(ReceiptPath))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadReceipt(t *testing.T, r *Root) *Receipt {
	t.Helper()
	rc, _, err := LoadReceipt(r)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestFileFresh(t *testing.T) {
	r := newRoot(t)
	f := toolStep()
	if c := checkOnly(t, r, f); c.State != ToDo || !strings.Contains(c.Detail, "create "+toolPath) {
		t.Fatalf("check on a fresh root = %v %q, want ToDo create", c.State, c.Detail)
	}
	install(t, r, f)

	host := r.HostPath(toolPath)
	if got := readHost(t, host); !bytes.Equal(got, toolV1) {
		t.Fatalf("content = %q, want %q", got, toolV1)
	}
	fi, _ := os.Lstat(host)
	st := lstatT(t, host)
	if fi.Mode() != 0o755 || int(st.Uid) != f.UID || int(st.Gid) != f.GID {
		t.Fatalf("mode/owner = %v %d:%d, want -rwxr-xr-x %d:%d", fi.Mode(), st.Uid, st.Gid, f.UID, f.GID)
	}
	e := loadReceipt(t, r).Paths[toolPath]
	if e == nil {
		t.Fatalf("receipt has no entry for %s", toolPath)
	}
	want := Entry{Kind: KindFile, SHA256: sum(toolV1), Size: int64(len(toolV1)), Mode: "0755", UID: f.UID, GID: f.GID,
		Inode: st.Ino, MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano(), Step: "test.tool", Version: Version}
	if *e != want {
		t.Fatalf("receipt entry = %+v\nwant %+v", *e, want)
	}
	dirs := loadReceipt(t, r).Dirs
	for _, d := range []string{"/usr", "/usr/local", "/usr/local/bin"} {
		if dirs[d].Step != "test.tool" {
			t.Errorf("receipt dirs = %v, want %s created by test.tool", dirs, d)
		}
	}
	// Nothing but the file itself in its directory: no temporary left over.
	if names := treehash.List(filepath.Dir(host)); len(names) != 1 {
		t.Fatalf("%s holds %v, want only tool", filepath.Dir(host), names)
	}
}

func TestFileAlreadyDone(t *testing.T) {
	r := newRoot(t)
	install(t, r, toolStep())
	host := r.HostPath(toolPath)
	before := *lstatT(t, host)
	receipt := receiptBytes(t, r)
	receiptStat := *lstatT(t, r.HostPath(ReceiptPath))
	tree := treehash.Hash(t, r.Dir())

	if c := checkOnly(t, r, toolStep()); c.State != Done {
		t.Fatalf("check = %v %q, want Done", c.State, c.Detail)
	}
	rep := execute(t, r, nil, toolStep())
	wantStatuses(t, rep, StatusOK)
	if rep.Changed != 0 || rep.ExitCode() != ExitOK {
		t.Fatalf("changed = %d, exit = %d, want 0, 0", rep.Changed, rep.ExitCode())
	}
	after := *lstatT(t, host)
	if after.Ino != before.Ino || after.Ctim != before.Ctim || after.Mtim != before.Mtim {
		t.Fatalf("the file was rewritten by a no-op run: inode %d->%d ctime %v->%v", before.Ino, after.Ino, before.Ctim, after.Ctim)
	}
	if !bytes.Equal(receiptBytes(t, r), receipt) {
		t.Fatal("the receipt changed on a no-op run")
	}
	if st := lstatT(t, r.HostPath(ReceiptPath)); st.Ino != receiptStat.Ino || st.Mtim != receiptStat.Mtim {
		t.Fatal("the receipt was rewritten on a no-op run")
	}
	if treehash.Hash(t, r.Dir()) != tree {
		t.Fatal("the tree changed on a no-op run")
	}
}

func TestFileForeign(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content []byte
		detail  string
	}{
		{"npm script", []byte("#!/usr/bin/env node\nrequire('cli')\n"), "a script (#!/usr/bin/env node)"},
		{"binary", []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, "a file of 7 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRoot(t)
			host := r.HostPath(toolPath)
			writeHost(t, host, tc.content, 0o755)
			tree := treehash.Hash(t, r.Dir())
			c := checkOnly(t, r, toolStep())
			if c.State != Conflict || c.Forceable || !strings.Contains(c.Detail, tc.detail) || c.Fix == "" {
				t.Fatalf("check = %v forceable=%v %q fix %q, want an unforceable conflict naming %q and a fix", c.State, c.Forceable, c.Detail, c.Fix, tc.detail)
			}
			for _, opt := range []func(*Run){nil, force} {
				rep := execute(t, r, opt, toolStep())
				wantStatuses(t, rep, StatusConflict)
				if rep.ExitCode() != ExitConflict {
					t.Fatalf("exit = %d, want %d", rep.ExitCode(), ExitConflict)
				}
			}
			if got := readHost(t, host); !bytes.Equal(got, tc.content) {
				t.Fatalf("the foreign file changed: %q", got)
			}
			if treehash.Hash(t, r.Dir()) != tree {
				t.Fatalf("the tree changed: %v", treehash.List(r.Dir()))
			}
		})
	}
}

func TestFileSymlinkAtPath(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	writeHost(t, victim, []byte("outside the root\n"), 0o644)
	for _, link := range []string{victim, "../../../../../../../../" + victim, "/etc/other"} {
		t.Run(link, func(t *testing.T) {
			r := newRoot(t)
			writeHost(t, r.HostPath("/etc/other"), []byte("in the root\n"), 0o644)
			host := r.HostPath(toolPath)
			os.MkdirAll(filepath.Dir(host), 0o755)
			if err := os.Symlink(link, host); err != nil {
				t.Fatal(err)
			}
			tree := treehash.Hash(t, r.Dir())
			c := checkOnly(t, r, toolStep())
			if c.State != Conflict || c.Forceable || !strings.Contains(c.Detail, "a symlink to "+link) {
				t.Fatalf("check = %v forceable=%v %q, want an unforceable conflict naming the link", c.State, c.Forceable, c.Detail)
			}
			wantStatuses(t, execute(t, r, force, toolStep()), StatusConflict)
			if got := readHost(t, victim); string(got) != "outside the root\n" {
				t.Fatalf("the link's target outside the root was written: %q", got)
			}
			if l, _ := os.Readlink(host); l != link {
				t.Fatalf("the link now points at %q", l)
			}
			if treehash.Hash(t, r.Dir()) != tree {
				t.Fatal("the tree changed")
			}
		})
	}
}

// A file cco wrote that someone replaced with a symlink is cco's path, so
// --force may take it back; the link itself goes to the backups, and what it
// pointed at is never touched.
func TestFileOwnedReplacedBySymlink(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	writeHost(t, victim, []byte("outside\n"), 0o644)
	r := newRoot(t)
	install(t, r, toolStep())
	host := r.HostPath(toolPath)
	os.Remove(host)
	os.Symlink(victim, host)

	c := checkOnly(t, r, toolStep())
	if c.State != Conflict || !c.Forceable {
		t.Fatalf("check = %v forceable=%v %q, want a forceable conflict", c.State, c.Forceable, c.Detail)
	}
	wantStatuses(t, execute(t, r, nil, toolStep()), StatusConflict)
	wantStatuses(t, execute(t, r, force, toolStep()), StatusChanged)
	if got := readHost(t, host); !bytes.Equal(got, toolV1) {
		t.Fatalf("content = %q", got)
	}
	if got := readHost(t, victim); string(got) != "outside\n" {
		t.Fatalf("the link's target was written: %q", got)
	}
	if l, err := os.Readlink(r.HostPath(StateDir + "/backups/" + fixedStamp + toolPath)); err != nil || l != victim {
		t.Fatalf("backup = %q, %v; want the link to %s", l, err, victim)
	}
}

func TestFileHandEdited(t *testing.T) {
	edited := []byte("#!/bin/sh\necho v9\n") // same size: only the stamp tells
	setup := func(t *testing.T) (*Root, string) {
		r := newRoot(t)
		install(t, r, toolStep())
		host := r.HostPath(toolPath)
		if err := os.WriteFile(host, edited, 0o755); err != nil { // in place: same inode
			t.Fatal(err)
		}
		return r, host
	}
	t.Run("without force", func(t *testing.T) {
		r, host := setup(t)
		c := checkOnly(t, r, toolStep())
		if c.State != Conflict || !c.Forceable || !strings.Contains(c.Detail, "edited") || !strings.Contains(c.Fix, "--force") {
			t.Fatalf("check = %v forceable=%v %q fix %q, want a forceable conflict", c.State, c.Forceable, c.Detail, c.Fix)
		}
		tree := treehash.Hash(t, r.Dir())
		rep := execute(t, r, nil, toolStep())
		wantStatuses(t, rep, StatusConflict)
		if rep.ExitCode() != ExitConflict || rep.Conflicts != 1 {
			t.Fatalf("exit = %d conflicts = %d, want 3, 1", rep.ExitCode(), rep.Conflicts)
		}
		if treehash.Hash(t, r.Dir()) != tree || !bytes.Equal(readHost(t, host), edited) {
			t.Fatal("the edited file or the tree changed without --force")
		}
	})
	t.Run("dry run with force", func(t *testing.T) {
		r, _ := setup(t)
		tree := treehash.Hash(t, r.Dir())
		rep := execute(t, r, func(run *Run) { run.DryRun, run.Force = true, true }, toolStep())
		wantStatuses(t, rep, StatusTodo)
		if !strings.Contains(rep.Steps[0].Detail, "--force would replace it") {
			t.Fatalf("detail = %q", rep.Steps[0].Detail)
		}
		if treehash.Hash(t, r.Dir()) != tree {
			t.Fatal("a dry run with --force wrote")
		}
	})
	t.Run("with force", func(t *testing.T) {
		r, host := setup(t)
		rep := execute(t, r, force, toolStep())
		wantStatuses(t, rep, StatusChanged)
		backup := StateDir + "/backups/" + fixedStamp + toolPath
		if !strings.Contains(rep.Steps[0].Detail, backup) {
			t.Fatalf("detail %q does not say where the old bytes are (%s)", rep.Steps[0].Detail, backup)
		}
		if got := readHost(t, host); !bytes.Equal(got, toolV1) {
			t.Fatalf("content = %q, want %q", got, toolV1)
		}
		if got := readHost(t, r.HostPath(backup)); !bytes.Equal(got, edited) {
			t.Fatalf("backup = %q, want the edited bytes", got)
		}
		// Never beside the file: a backup there would be a second tool on PATH.
		if names := treehash.List(filepath.Dir(host)); len(names) != 1 || names[0] != "tool" {
			t.Fatalf("%s holds %v, want only tool", filepath.Dir(host), names)
		}
		if fi, _ := os.Stat(r.HostPath(StateDir + "/backups")); fi == nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("backups dir mode = %v, want 0700", fi)
		}
		wantStatuses(t, execute(t, r, nil, toolStep()), StatusOK)
	})
}

func TestFileDrift(t *testing.T) {
	uid, gid := owner()
	for _, tc := range []struct {
		name  string
		drift func(t *testing.T, host string)
		root  bool
	}{
		{"mode", func(t *testing.T, host string) { os.Chmod(host, 0o777) }, false},
		{"owner", func(t *testing.T, host string) { os.Lchown(host, uid+1, gid+1) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("changing an owner needs root")
			}
			r := newRoot(t)
			install(t, r, toolStep())
			host := r.HostPath(toolPath)
			tc.drift(t, host)
			if c := checkOnly(t, r, toolStep()); c.State != ToDo {
				t.Fatalf("check = %v %q, want ToDo", c.State, c.Detail)
			}
			wantStatuses(t, execute(t, r, nil, toolStep()), StatusChanged)
			fi, _ := os.Lstat(host)
			st := lstatT(t, host)
			if fi.Mode() != 0o755 || int(st.Uid) != uid || int(st.Gid) != gid {
				t.Fatalf("after repair: %v %d:%d", fi.Mode(), st.Uid, st.Gid)
			}
			wantStatuses(t, execute(t, r, nil, toolStep()), StatusOK)
		})
	}
}

// A new version of an owned, unedited file is an update, not a conflict.
func TestFileUpdate(t *testing.T) {
	r := newRoot(t)
	install(t, r, toolStep())
	f := toolStep()
	f.Content = toolV2
	if c := checkOnly(t, r, f); c.State != ToDo || !strings.Contains(c.Detail, "update") {
		t.Fatalf("check = %v %q, want ToDo update", c.State, c.Detail)
	}
	wantStatuses(t, execute(t, r, nil, f), StatusChanged)
	if got := readHost(t, r.HostPath(toolPath)); !bytes.Equal(got, toolV2) {
		t.Fatalf("content = %q", got)
	}
	if e := loadReceipt(t, r).Paths[toolPath]; e.SHA256 != sum(toolV2) {
		t.Fatalf("receipt sha256 = %s, want the new bytes'", e.SHA256)
	}
	if _, err := os.Stat(r.HostPath(StateDir + "/backups")); err == nil {
		t.Fatal("an update of an unedited file made a backup")
	}
}

func TestFileTouchedSameBytes(t *testing.T) {
	r := newRoot(t)
	install(t, r, toolStep())
	host := r.HostPath(toolPath)
	when := time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(host, when, when); err != nil {
		t.Fatal(err)
	}
	old := receiptBytes(t, r)
	wantStatuses(t, execute(t, r, nil, toolStep()), StatusOK)
	e := loadReceipt(t, r).Paths[toolPath]
	if e.MtimeNS != when.UnixNano() || e.CtimeNS != lstatT(t, host).Ctim.Nano() {
		t.Fatalf("receipt stamp mtime %d ctime %d, want the touched file's %d", e.MtimeNS, e.CtimeNS, when.UnixNano())
	}
	if bytes.Equal(receiptBytes(t, r), old) {
		t.Fatal("the receipt was not restamped")
	}
	if !bytes.Equal(readHost(t, host), toolV1) {
		t.Fatal("the touched file was rewritten")
	}
	restamped := receiptBytes(t, r)
	wantStatuses(t, execute(t, r, nil, toolStep()), StatusOK)
	if !bytes.Equal(receiptBytes(t, r), restamped) {
		t.Fatal("the receipt changed again on the next no-op run")
	}
}

func TestFileKeepExisting(t *testing.T) {
	conf := func() *File {
		f := toolStep()
		f.Path, f.Mode, f.Content, f.KeepExisting = "/etc/cco/sandbox.toml", 0o644, []byte("# default\n"), true
		return f
	}
	t.Run("absent is created", func(t *testing.T) {
		r := newRoot(t)
		install(t, r, conf())
		if got := readHost(t, r.HostPath("/etc/cco/sandbox.toml")); string(got) != "# default\n" {
			t.Fatalf("content = %q", got)
		}
		wantStatuses(t, execute(t, r, nil, conf()), StatusOK)
	})
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, r *Root)
	}{
		{"edited is left", func(t *testing.T, r *Root) { install(t, r, conf()) }},
		{"foreign is left", func(t *testing.T, r *Root) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRoot(t)
			tc.prepare(t, r)
			host := r.HostPath("/etc/cco/sandbox.toml")
			writeHost(t, host, []byte("# mine\n"), 0o600)
			tree := treehash.Hash(t, r.Dir())
			for _, opt := range []func(*Run){nil, force} {
				rep := execute(t, r, opt, conf())
				wantStatuses(t, rep, StatusOK)
				if !strings.Contains(rep.Steps[0].Detail, "left as it is") {
					t.Fatalf("detail = %q", rep.Steps[0].Detail)
				}
			}
			if treehash.Hash(t, r.Dir()) != tree {
				t.Fatal("the operator's file or the tree changed")
			}
			// A kept file that its Validate refuses is a conflict with the
			// fix, and is still never replaced, --force or not.
			bad := conf()
			bad.Validate = func(b []byte) error {
				if strings.Contains(string(b), "mine") {
					return errors.New("sandbox.toml: egress: \"bogus\" is not a mode")
				}
				return nil
			}
			bad.ValidateFix = "fix the file"
			for _, opt := range []func(*Run){nil, force} {
				rep := execute(t, r, opt, bad)
				wantStatuses(t, rep, StatusConflict)
				if sr := rep.Steps[0]; sr.Fix != "fix the file" || !strings.Contains(sr.Detail, "bogus") {
					t.Errorf("a refused file: detail %q, fix %q", sr.Detail, sr.Fix)
				}
			}
			if treehash.Hash(t, r.Dir()) != tree {
				t.Fatal("a refused file was changed")
			}
		})
	}
}

// A path given without its leading slash names the same target-system path.
func TestFileUncleanPath(t *testing.T) {
	r := newRoot(t)
	f := toolStep()
	f.Path = "usr/local//bin/tool"
	rep := execute(t, r, nil, f)
	wantStatuses(t, rep, StatusChanged)
	if e := loadReceipt(t, r).Paths[toolPath]; e == nil {
		t.Fatalf("receipt paths: %v", loadReceipt(t, r).Paths)
	}
	wantStatuses(t, execute(t, r, nil, f), StatusOK)
	if got := rep.Steps[0].Paths; len(got) != 1 || got[0] != toolPath {
		t.Fatalf("report paths = %v, want [%s]", got, toolPath)
	}
}

func TestFileDiff(t *testing.T) {
	r := newRoot(t)
	install(t, r, toolStep())
	f := toolStep()
	f.Content = toolV2
	rep := execute(t, r, func(run *Run) { run.DryRun, run.Diff = true, true }, f)
	d := rep.Steps[0].Diff
	if !strings.Contains(d, "-echo v1") || !strings.Contains(d, "+echo version two") {
		t.Fatalf("diff = %q", d)
	}
}

// Record returns only once the clock that stamps file times has moved past
// the recorded ctime: a write right after it then gets another ctime, and a
// stamp never vouches for bytes that are no longer there.
func TestRecordWaitsForTheClockTick(t *testing.T) {
	r := newRoot(t)
	run := newRun(t, r)
	for i := range 20 {
		p := fmt.Sprintf("/f%d", i)
		if err := os.WriteFile(r.HostPath(p), []byte("x"), 0o644); err != nil { // no fsync: no time passes
			t.Fatal(err)
		}
		if err := run.Record(p, KindFile, sum([]byte("x")), "test"); err != nil {
			t.Fatal(err)
		}
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
		if e := run.Receipt.Paths[p]; ts.Nano() <= e.CtimeNS {
			t.Fatalf("Record returned at %d, before the clock passed the recorded ctime %d", ts.Nano(), e.CtimeNS)
		}
	}
	// And so an edit right after an install, same size, same inode, is seen.
	install(t, r, toolStep())
	os.WriteFile(r.HostPath(toolPath), []byte("#!/bin/sh\necho v2\n"), 0o755)
	if c := checkOnly(t, r, toolStep()); c.State != Conflict {
		t.Fatalf("an edit right after the install: %v %q, want a conflict", c.State, c.Detail)
	}
}

// Two forced runs within one second share a backup directory; the second
// must not replace the first's backup.
func TestFileBackupsNeverReplaced(t *testing.T) {
	r := newRoot(t)
	install(t, r, toolStep())
	host := r.HostPath(toolPath)
	backup := r.HostPath(StateDir + "/backups/" + fixedStamp + toolPath)
	for i, edit := range []string{"first edit\n", "second edit\n"} {
		writeHost(t, host, []byte(edit), 0o755)
		rep := execute(t, r, force, toolStep())
		wantStatuses(t, rep, StatusChanged)
		where := backup
		if i > 0 {
			where = fmt.Sprintf("%s.%d", backup, i)
		}
		if got := readHost(t, where); string(got) != edit {
			t.Fatalf("backup %s = %q, want %q", where, got, edit)
		}
		if !strings.Contains(rep.Steps[0].Detail, strings.TrimPrefix(where, r.Dir())) {
			t.Fatalf("detail %q does not name %s", rep.Steps[0].Detail, where)
		}
	}
}
