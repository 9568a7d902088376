package deploy

import (
	"fmt"
	"regexp"
	"strings"
)

// Diff shows how the template text old differs from new, line by line, for
// a person to read: each run of changed lines as "-" (old) and "+" (new)
// lines with two lines of context, headed by its line number in old and the
// template entry (resource, parameter) it is in. At most maxDiffLines lines
// are shown. "" when the texts are equal.
func Diff(old, new []byte) string {
	if string(old) == string(new) {
		return ""
	}
	a := strings.Split(string(old), "\n")
	b := strings.Split(string(new), "\n")
	// The common head and tail are most of a template: the LCS runs on what
	// lies between.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := lineOps(a[pre:len(a)-suf], b[pre:len(b)-suf])
	var out strings.Builder
	total, shown := countChanged(ops), 0
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := i
		for i < len(ops) && (ops[i].kind != ' ' || nextChange(ops, i) <= i+2*diffContext) {
			i++
		}
		line := pre + ops[start].oldLine
		in := line
		if ops[start].kind == '+' {
			in-- // added lines belong to the entry before them
		}
		fmt.Fprintf(&out, "@@ template.yaml line %d%s @@\n", line+1, entryOf(a, in))
		for j := max(0, line-diffContext); j < line; j++ {
			out.WriteString("   " + a[j] + "\n")
		}
		for _, op := range ops[start:i] {
			if shown == maxDiffLines {
				fmt.Fprintf(&out, "   … (%d more changed lines)\n", total-shown)
				return strings.TrimSuffix(out.String(), "\n")
			}
			out.WriteString(string(op.kind) + "  " + op.text + "\n")
			if op.kind != ' ' {
				shown++
			}
		}
		end := pre + ops[i-1].oldLine + 1
		if ops[i-1].kind == '+' {
			end--
		}
		for j := end; j < min(len(a), end+diffContext); j++ {
			out.WriteString("   " + a[j] + "\n")
		}
	}
	return strings.TrimSuffix(out.String(), "\n")
}

const (
	diffContext  = 2
	maxDiffLines = 60
)

// lineOp is one line of a diff: kept (' '), removed ('-') or added ('+');
// oldLine is its index in the old lines (for an added line, where it goes).
type lineOp struct {
	kind    byte
	text    string
	oldLine int
}

// lineOps diffs a and b by their longest common subsequence of lines.
// Generated sections are a few hundred lines; past maxLCSCells the middle
// is shown as removed, then added.
func lineOps(a, b []string) []lineOp {
	var ops []lineOp
	if len(a)*len(b) > maxLCSCells {
		for i, l := range a {
			ops = append(ops, lineOp{'-', l, i})
		}
		for _, l := range b {
			ops = append(ops, lineOp{'+', l, len(a)})
		}
		return ops
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int32, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, lineOp{' ', a[i], i})
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, lineOp{'-', a[i], i})
			i++
		default:
			ops = append(ops, lineOp{'+', b[j], i})
			j++
		}
	}
	return ops
}

const maxLCSCells = 4 << 20

// nextChange is the index of the first changed op after i (len(ops) when
// none).
func nextChange(ops []lineOp, i int) int {
	for j := i + 1; j < len(ops); j++ {
		if ops[j].kind != ' ' {
			return j
		}
	}
	return len(ops) + 2*diffContext + 1
}

func countChanged(ops []lineOp) int {
	n := 0
	for _, op := range ops {
		if op.kind != ' ' {
			n++
		}
	}
	return n
}

// entryLine is a template entry: a key indented two spaces (a parameter, a
// resource, an output).
var entryLine = regexp.MustCompile(`^  ([A-Za-z0-9]+):`)

// entryOf names the entry line i of lines is in (" (in X)"), "" when none.
func entryOf(lines []string, i int) string {
	for j := min(i, len(lines)-1); j >= 0; j-- {
		if m := entryLine.FindStringSubmatch(lines[j]); m != nil {
			return " (in " + m[1] + ")"
		}
		if lines[j] != "" && lines[j][0] != ' ' && lines[j][0] != '#' {
			return ""
		}
	}
	return ""
}
