package provision

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

// faultyFile is a File step whose Apply can be made to fail, the way a full
// disk or a killed download fails one step in the middle of a plan.
type faultyFile struct {
	*File
	fail bool
}

func (f *faultyFile) Apply(run *Run, c Check) (string, error) {
	if f.fail {
		return "", errors.New("injected apply failure")
	}
	return f.File.Apply(run, c)
}

// plan is four file steps; "c" needs "b".
func plan(failB bool) []Step {
	mk := func(id string) *File {
		f := toolStep()
		f.StepID, f.StepName, f.Path, f.Content = "test."+id, "install "+id, "/opt/cco/"+id, []byte("content of "+id+"\n")
		return f
	}
	c := mk("c")
	c.DependsOn = []string{"test.b"}
	return []Step{mk("a"), &faultyFile{File: mk("b"), fail: failB}, c, mk("d")}
}

func TestExecuteDryRunWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, r *Root)
	}{
		{"fresh root", func(t *testing.T, r *Root) {}},
		{"half installed", func(t *testing.T, r *Root) {
			wantStatuses(t, execute(t, r, nil, plan(true)...), StatusChanged, StatusFailed, StatusSkipped, StatusChanged)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRoot(t)
			tc.prepare(t, r)
			before := treehash.Hash(t, r.Dir())
			names := treehash.List(r.Dir())
			rep := execute(t, r, dryRun, plan(false)...)
			if treehash.Hash(t, r.Dir()) != before {
				t.Fatalf("a dry run changed the tree: %v -> %v", names, treehash.List(r.Dir()))
			}
			for _, sr := range rep.Steps {
				if (sr.ID == "test.a" || sr.ID == "test.d") && tc.name == "half installed" {
					if sr.Status != StatusOK {
						t.Fatalf("installed step a: %s", sr.Status)
					}
					continue
				}
				if sr.Status != StatusTodo {
					t.Fatalf("step %s: %s %q, want todo", sr.ID, sr.Status, sr.Detail)
				}
			}
			if !rep.DryRun || rep.Changed != len(rep.Steps)-2*btoi(tc.name == "half installed") || rep.ExitCode() != ExitOK {
				t.Fatalf("report dry_run=%v changed=%d exit=%d", rep.DryRun, rep.Changed, rep.ExitCode())
			}
		})
	}
	// On a fresh root nothing at all appears: no receipt, no lock, no dirs.
	r := newRoot(t)
	execute(t, r, dryRun, plan(false)...)
	if names := treehash.List(r.Dir()); len(names) != 0 {
		t.Fatalf("a dry run on a fresh root created %v", names)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestExecuteFailureMidPlanThenConverges(t *testing.T) {
	r := newRoot(t)
	rep := execute(t, r, nil, plan(true)...)
	wantStatuses(t, rep, StatusChanged, StatusFailed, StatusSkipped, StatusChanged)
	if !strings.Contains(rep.Steps[1].Detail, "injected apply failure") || !strings.Contains(rep.Steps[2].Detail, "test.b") {
		t.Fatalf("details: %q / %q", rep.Steps[1].Detail, rep.Steps[2].Detail)
	}
	if rep.Changed != 2 || rep.Failed != 1 || rep.Conflicts != 0 || rep.ExitCode() != ExitFailed {
		t.Fatalf("counts changed=%d failed=%d conflicts=%d exit=%d", rep.Changed, rep.Failed, rep.Conflicts, rep.ExitCode())
	}
	rc := loadReceipt(t, r)
	for p, want := range map[string]bool{"/opt/cco/a": true, "/opt/cco/b": false, "/opt/cco/c": false, "/opt/cco/d": true} {
		if (rc.Paths[p] != nil) != want {
			t.Errorf("receipt has %s: %v, want %v", p, rc.Paths[p] != nil, want)
		}
	}
	for _, p := range []string{"/opt/cco/b", "/opt/cco/c"} {
		if _, err := os.Lstat(r.HostPath(p)); err == nil {
			t.Errorf("%s exists after its step failed or was skipped", p)
		}
	}

	wantStatuses(t, execute(t, r, nil, plan(false)...), StatusOK, StatusChanged, StatusChanged, StatusOK)
	receipt := receiptBytes(t, r)
	st := *lstatT(t, r.HostPath(ReceiptPath))
	tree := treehash.Hash(t, r.Dir())
	rep = execute(t, r, nil, plan(false)...)
	wantStatuses(t, rep, StatusOK, StatusOK, StatusOK, StatusOK)
	if rep.Changed != 0 || rep.ExitCode() != ExitOK {
		t.Fatalf("third run: changed=%d exit=%d", rep.Changed, rep.ExitCode())
	}
	if !bytes.Equal(receiptBytes(t, r), receipt) {
		t.Fatal("the receipt changed on a no-op run")
	}
	if now := lstatT(t, r.HostPath(ReceiptPath)); now.Mtim != st.Mtim || now.Ino != st.Ino {
		t.Fatal("the receipt was rewritten on a no-op run")
	}
	if treehash.Hash(t, r.Dir()) != tree {
		t.Fatal("the tree changed on a no-op run")
	}
	if len(loadReceipt(t, r).Paths) != 4 {
		t.Fatalf("receipt paths: %v", loadReceipt(t, r).Paths)
	}
}

// The receipt is saved right after each step that changed something, so a
// run killed between steps keeps what it did.
func TestExecuteSavesAfterEachStep(t *testing.T) {
	r := newRoot(t)
	run := newRun(t, r)
	var seen [][]string
	run.AfterStep = func(id string) {
		rc, _, err := LoadReceipt(r)
		if err != nil {
			t.Fatal(err)
		}
		var ps []string
		for p := range rc.Paths {
			ps = append(ps, p)
		}
		seen = append(seen, append([]string{id}, ps...))
	}
	Execute(run, plan(false))
	want := [][]string{{"test.a", "/opt/cco/a"}, {"test.b", "/opt/cco/a", "/opt/cco/b"}}
	if len(seen) != 4 || !sameSet(seen[0], want[0]) || !sameSet(seen[1], want[1]) || len(seen[3]) != 5 {
		t.Fatalf("receipt on disk after each step: %v", seen)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		if !m[s] {
			return false
		}
	}
	return true
}

func TestReportCountsAndExitCode(t *testing.T) {
	for _, tc := range []struct {
		statuses                  []string
		changed, conflicts, faile int
		exit                      int
	}{
		{nil, 0, 0, 0, ExitOK},
		{[]string{StatusOK, StatusSkipped}, 0, 0, 0, ExitOK},
		{[]string{StatusOK, StatusChanged, StatusTodo}, 2, 0, 0, ExitOK},
		{[]string{StatusConflict, StatusChanged}, 1, 1, 0, ExitConflict},
		{[]string{StatusConflict, StatusFailed, StatusConflict}, 0, 2, 1, ExitFailed},
		{[]string{StatusFailed}, 0, 0, 1, ExitFailed},
	} {
		rep := &Report{}
		for _, s := range tc.statuses {
			rep.Add(StepReport{ID: "x", Status: s})
		}
		if rep.Changed != tc.changed || rep.Conflicts != tc.conflicts || rep.Failed != tc.faile || rep.ExitCode() != tc.exit {
			t.Errorf("%v: changed=%d conflicts=%d failed=%d exit=%d, want %d %d %d %d", tc.statuses,
				rep.Changed, rep.Conflicts, rep.Failed, rep.ExitCode(), tc.changed, tc.conflicts, tc.faile, tc.exit)
		}
	}
	if ExitOK != 0 || ExitFailed != 1 || ExitUsage != 2 || ExitConflict != 3 {
		t.Fatal("the documented exit codes changed")
	}
}

func TestReportJSON(t *testing.T) {
	r := newRoot(t)
	writeHost(t, r.HostPath("/opt/cco/d"), []byte("foreign"), 0o644)
	steps := plan(true)
	steps = append(steps, &snippetStep{})
	rep := execute(t, r, nil, steps...)

	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&buf)
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		t.Fatalf("more than one JSON document: %v %v", extra, err)
	}
	want := map[string]any{"schema": 1.0, "version": Version, "root": r.Dir(), "dry_run": false, "changed": 1.0, "conflicts": 1.0, "failed": 1.0}
	for k, v := range want {
		if doc[k] != v {
			t.Errorf("%s = %v, want %v", k, doc[k], v)
		}
	}
	steps2 := doc["steps"].([]any)
	wantSteps := [][2]string{{"test.a", StatusChanged}, {"test.b", StatusFailed}, {"test.c", StatusSkipped}, {"test.d", StatusConflict}, {"test.snippet", StatusOK}}
	if len(steps2) != len(wantSteps) {
		t.Fatalf("steps: %v", steps2)
	}
	for i, s := range steps2 {
		m := s.(map[string]any)
		for _, k := range []string{"id", "name", "status", "detail", "paths"} {
			if _, ok := m[k]; !ok {
				t.Errorf("step %d has no %q: %v", i, k, m)
			}
		}
		if m["id"] != wantSteps[i][0] || m["status"] != wantSteps[i][1] {
			t.Errorf("step %d = %v %v, want %v", i, m["id"], m["status"], wantSteps[i])
		}
		if _, ok := m["paths"].([]any); !ok {
			t.Errorf("step %d paths = %#v, want an array", i, m["paths"])
		}
	}
	if m := steps2[4].(map[string]any); m["snippet"] != "key = 1\n" || !reflect.DeepEqual(m["paths"], []any{}) {
		t.Errorf("snippet step = %v, want its snippet and paths []", m)
	}
	if !strings.Contains(buf.String(), "") {
		t.Fatal()
	}

	// An empty report is still one document with steps [].
	buf.Reset()
	(&Report{Schema: ReportSchema}).WriteJSON(&buf)
	if !strings.Contains(buf.String(), `"steps": []`) {
		t.Fatalf("empty report: %s", buf.String())
	}
	var raw bytes.Buffer
	rep.WriteJSON(&raw)
	if !strings.Contains(raw.String(), `"paths": []`) || strings.Contains(raw.String(), "null") {
		t.Fatalf("a step without paths is not []:\n%s", raw.String())
	}
}

// snippetStep has no paths and a snippet to merge by hand.
type snippetStep struct{}

func (snippetStep) ID() string   { return "test.snippet" }
func (snippetStep) Name() string { return "a snippet" }
func (snippetStep) Check(*View) (Check, error) {
	return Check{State: Done, Detail: "merge by hand", Snippet: "key = 1\n"}, nil
}
func (snippetStep) Apply(*Run, Check) (string, error) { return "", errors.New("never applied") }

func TestReportText(t *testing.T) {
	rep := &Report{}
	rep.Add(StepReport{ID: "shadow.claude", Status: StatusChanged, Detail: "created"})
	rep.Add(StepReport{ID: "x", Status: StatusConflict, Detail: "foreign", Snippet: "a = 1\n", Warnings: []string{"careful"}})
	var b strings.Builder
	rep.WriteText(&b)
	for _, w := range []string{"changed  shadow.claude  created", "warning: careful", "    a = 1", "1 changed, 1 conflicts, 0 failed (of 2 steps)"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("text report lacks %q:\n%s", w, b.String())
		}
	}
	b.Reset()
	(&Report{Steps: []StepReport{{ID: "a", Status: StatusOK}}}).WriteText(&b)
	if !strings.Contains(b.String(), "nothing to do: 1 steps") {
		t.Errorf("no-op text: %s", b.String())
	}
}

// skipStep is a step that does not apply here (a disabled agent).
type skipStep struct{}

func (skipStep) ID() string                        { return "test.disabled" }
func (skipStep) Name() string                      { return "a disabled step" }
func (skipStep) Check(*View) (Check, error)        { return Check{State: Skip, Detail: "disabled"}, nil }
func (skipStep) Apply(*Run, Check) (string, error) { return "", errors.New("never applied") }

// A dry run predicts an apply: a step that needs a skipped one is skipped in
// both.
func TestExecuteNeedsSkipped(t *testing.T) {
	dep := toolStep()
	dep.DependsOn = []string{"test.disabled"}
	for _, opt := range []func(*Run){dryRun, nil} {
		r := newRoot(t)
		rep := execute(t, r, opt, skipStep{}, dep)
		wantStatuses(t, rep, StatusSkipped, StatusSkipped)
		if !strings.Contains(rep.Steps[1].Detail, "test.disabled") {
			t.Fatalf("detail = %q", rep.Steps[1].Detail)
		}
		if _, err := os.Lstat(r.HostPath(toolPath)); err == nil {
			t.Fatal("a step whose dependency was skipped installed its file")
		}
	}
}
