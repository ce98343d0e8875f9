package managed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/cco-dev/cco/guard"
)

// SyntaxError is a policy file that does not parse, with the parser's line
// and column so an operator can go straight to it.
type SyntaxError struct {
	Path      string
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s does not parse: line %d, column %d: %s", e.Path, e.Line, e.Col, e.Msg)
}

// IsGuardCommand reports whether a hook command line runs our script for
// hook, with the agent's name or with none (the guard then infers it).
func IsGuardCommand(cmd, hook, agent string) bool {
	f := strings.Fields(cmd)
	if len(f) == 0 || len(f) > 2 {
		return false
	}
	if strings.Trim(f[0], `"'`) != guard.ScriptPath(hook) {
		return false
	}
	return len(f) == 1 || strings.Trim(f[1], `"'`) == agent
}

// matchesStartup: no matcher (or "*") matches every source; otherwise the
// matcher is a regular expression over the source name.
func matchesStartup(m *string) bool {
	if m == nil || *m == "" || *m == "*" {
		return true
	}
	re, err := regexp.Compile("^(?:" + *m + ")$")
	if err != nil {
		return *m == "startup"
	}
	return re.MatchString("startup")
}

// hujsonError turns hujson's "hujson: line L, column C: why" into a
// *SyntaxError.
func hujsonError(path string, err error) error {
	var line, col int
	if _, serr := fmt.Sscanf(err.Error(), "hujson: line %d, column %d:", &line, &col); serr == nil {
		_, msg, _ := strings.Cut(err.Error(), ": ")
		_, msg, _ = strings.Cut(msg, ": ")
		return &SyntaxError{Path: path, Line: line, Col: col, Msg: msg}
	}
	return fmt.Errorf("%s does not parse: %w", path, err)
}

func jsonError(path string, b []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(b, se.Offset)
		return &SyntaxError{Path: path, Line: line, Col: col, Msg: se.Error()}
	case errors.As(err, &te):
		line, col := lineCol(b, te.Offset)
		return &SyntaxError{Path: path, Line: line, Col: col, Msg: "the value of " + te.Field + " is a " + te.Value + ", not what the vendor's settings schema expects"}
	}
	return fmt.Errorf("%s does not parse: %w", path, err)
}

func lineCol(b []byte, off int64) (int, int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	pre := b[:off]
	line := bytes.Count(pre, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(pre, '\n')
	if col < 1 {
		col = 1
	}
	return line, col
}
