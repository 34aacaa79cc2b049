// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package docscheck reads README.md and docs/**/*.md the way a reader follows them and reports
// each reference that leads nowhere: a relative link to a missing file or heading, a link out of
// the repository, a `make` target the Makefile does not define, a repository path that does not
// exist, a --flag that none of the project's binaries defines, an aether_* metric that no Go
// source names, and an install command (`helm install`, `kubectl apply -k`) that is not one of
// hack/install/install.sh's paths, which the cluster tier runs, or one of those paths that
// docs/install.md does not quote. Its test runs it over the repository, so `make test` fails when a doc lies.
package docscheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Problem is one bad reference: the file (relative to the repository), its line, and what is wrong.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// Check reads the documentation of the repository at root and returns every problem, sorted.
func Check(root string) ([]Problem, error) {
	files, err := docFiles(root)
	if err != nil {
		return nil, err
	}
	targets, err := makeTargets(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	topDirs, err := topLevelDirs(root)
	if err != nil {
		return nil, err
	}
	goSource, err := goSources(root, topDirs)
	if err != nil {
		return nil, err
	}
	installs, err := installCommands(root)
	if err != nil {
		return nil, err
	}
	c := &checker{root: root, targets: targets, topDirs: topDirs, goSource: goSource, flags: definedFlags(goSource), anchors: map[string]map[string]bool{},
		installs: installs, quoted: map[string]bool{}}
	var problems []Problem
	for _, f := range files {
		ps, err := c.checkFile(f)
		if err != nil {
			return nil, err
		}
		problems = append(problems, ps...)
	}
	problems = append(problems, c.unquotedInstalls()...)
	slices.SortFunc(problems, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	return problems, nil
}

type checker struct {
	root     string
	targets  map[string]bool
	topDirs  map[string]bool
	goSource string
	flags    map[string]bool
	anchors  map[string]map[string]bool // by absolute path of a markdown file
	// installs are the install paths' commands (command → path), quoted the paths docs/install.md quotes.
	installs map[string]string
	quoted   map[string]bool
}

// docFiles: README.md and every .md under docs/, relative to root.
func docFiles(root string) ([]string, error) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

var makeTargetLine = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*:([^=]|$)`)

// makeTargets: the targets the Makefile defines (rules at the start of a line; not variables).
func makeTargets(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	targets := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if m := makeTargetLine.FindStringSubmatch(line); m != nil {
			for t := range strings.FieldsSeq(m[1]) {
				targets[t] = true
			}
		}
	}
	return targets, nil
}

// topLevelDirs: the repository's top-level directories (a symbolic link to a directory counts),
// but for build output that .gitignore keeps out of the repository (bin/*, .local/); a code span
// is taken for a repository path only when it starts with one of them.
func topLevelDirs(root string) (map[string]bool, error) {
	ignored := map[string]bool{".git": true}
	if b, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "/"), "*"), "/")
			if name != "" && !strings.ContainsAny(name, "/*?[!#") {
				ignored[name] = true
			}
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		if ignored[e.Name()] {
			continue
		}
		if st, err := os.Stat(filepath.Join(root, e.Name())); err == nil && st.IsDir() {
			dirs[e.Name()] = true
		}
	}
	return dirs, nil
}

// goSources: every Go file of the repository, concatenated, for the metric-name check. Each
// top-level directory is walked from its real path, so a copy made of links reads the same.
func goSources(root string, topDirs map[string]bool) (string, error) {
	var sb strings.Builder
	for dir := range topDirs {
		real, err := filepath.EvalSymlinks(filepath.Join(root, dir))
		if err != nil {
			return "", err
		}
		err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				sb.Write(b)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return sb.String(), nil
}

var flagDefinition = regexp.MustCompile(`\.(?:Bool|BoolFunc|Duration|Float64|Func|Int|Int64|String|StringArray|StringSlice|TextVar|Uint|Uint64|Var)(?:Var)?P?\(\s*(?:&?[A-Za-z_][\w.]*(?:\(\))?\s*,\s*)?"([a-z][a-z0-9-]*)"`)

// flagConstant: a flag name defined as a constant (workloadidentity.IssuerFlag = "identity-issuer").
var flagConstant = regexp.MustCompile(`\b[A-Za-z]*Flag[A-Za-z]*\s*=\s*"([a-z][a-z0-9-]*)"`)

// libraryFlags are the flags the project's binaries get from a library they bind, which no call
// in the repository's own source names.
var libraryFlags = []string{
	// controller-runtime's zap.Options.BindFlags (the manager and the agent).
	"zap-devel", "zap-encoder", "zap-log-level", "zap-stacktrace-level", "zap-time-encoding",
	// genericclioptions.ConfigFlags (kubectl aether), and controller-runtime's --kubeconfig.
	"kubeconfig", "context", "namespace", "cluster", "user", "server", "token", "as", "as-group",
	"certificate-authority", "client-certificate", "client-key", "insecure-skip-tls-verify",
	"request-timeout", "tls-server-name",
}

// otherPrograms are the flags of programs other than the project's that the docs name on their
// own, with the program they belong to (the docs say which, beside them).
var otherPrograms = map[string]string{
	"event-ttl":                       "kube-apiserver",
	"kubelet-preferred-address-types": "kube-apiserver",
	"root-ca-file":                    "kube-controller-manager",
	"drain-time-s":                    "envoy",
}

// definedFlags: every flag the project's source defines, and the library-bound ones.
func definedFlags(goSource string) map[string]bool {
	flags := map[string]bool{}
	for _, m := range flagDefinition.FindAllStringSubmatch(goSource, -1) {
		flags[m[1]] = true
	}
	for _, m := range flagConstant.FindAllStringSubmatch(goSource, -1) {
		flags[m[1]] = true
	}
	for _, f := range libraryFlags {
		flags[f] = true
	}
	return flags
}

// block is a paragraph of prose or one line of a fenced code block, with its first line number.
type block struct {
	text string
	line int
	code bool
}

// split cuts a markdown file into prose paragraphs (code spans may cross their line breaks) and
// the lines of fenced code blocks, and returns the headings' anchors.
func split(text string) (blocks []block, anchors map[string]bool) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	var para []string
	paraLine := 0
	flush := func() {
		if len(para) > 0 {
			blocks = append(blocks, block{text: strings.Join(para, "\n"), line: paraLine})
			para = nil
		}
	}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
				continue
			}
			blocks = append(blocks, block{text: line, line: n, code: true})
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			flush()
			fence = trimmed[:3]
			continue
		}
		if trimmed == "" {
			flush()
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			flush()
			if a := Anchor(strings.TrimLeft(trimmed, "#")); a != "" {
				if k := seen[a]; k > 0 {
					anchors[fmt.Sprintf("%s-%d", a, k)] = true
				} else {
					anchors[a] = true
				}
				seen[a]++
			}
		}
		if len(para) == 0 {
			paraLine = n
		}
		para = append(para, line)
	}
	flush()
	return blocks, anchors
}

// Anchor is the anchor GitHub gives a heading: lower case, punctuation dropped (but - and _),
// each space a hyphen.
func Anchor(heading string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			sb.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// makeInCode: a make command at the start of a shell command in a code block.
	makeInCode = regexp.MustCompile(`(?:^|[;&|(]|\$)\s*make\s+([^;&|)#>]*)`)
	metric     = regexp.MustCompile(`\baether_[a-z0-9_]+`)
	target     = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)
	flagUse    = regexp.MustCompile(`(?:^|[\s\[(])--([a-z][a-z0-9-]*)`)
	// otherTool: a code span that is a command of a program other than the project's.
	otherTool = regexp.MustCompile(`^(?:kubectl|helm|go|make|nft|ip|nsenter|curl|grpcurl|envoy|spire-server|spire-agent|kube-apiserver|etcd|docker|ctr|promtool|benchstat|git|openssl)\b`)
	goIdent   = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)?$`)
)

func (c *checker) anchorsOf(abs string) (map[string]bool, error) {
	if a, ok := c.anchors[abs]; ok {
		return a, nil
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	_, a := split(string(b))
	c.anchors[abs] = a
	return a, nil
}

func (c *checker) checkFile(rel string) ([]Problem, error) {
	abs := filepath.Join(c.root, rel)
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	blocks, anchors := split(string(b))
	c.anchors[abs] = anchors
	var problems []Problem
	report := func(line int, format string, args ...any) {
		problems = append(problems, Problem{File: rel, Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	for _, bl := range blocks {
		if bl.code {
			for _, m := range makeInCode.FindAllStringSubmatch(bl.text, -1) {
				c.checkMake(bl.line, m[1], report)
			}
			c.checkInstall(rel, bl.line, bl.text, report)
			continue
		}
		// Links outside code spans.
		prose := codeSpan.ReplaceAllStringFunc(bl.text, func(s string) string { return strings.Repeat(" ", len(s)) })
		for _, m := range link.FindAllStringSubmatchIndex(prose, -1) {
			line := bl.line + strings.Count(prose[:m[0]], "\n")
			if err := c.checkLink(abs, prose[m[2]:m[3]], line, report); err != nil {
				return nil, err
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatchIndex(bl.text, -1) {
			line := bl.line + strings.Count(bl.text[:m[0]], "\n")
			span := strings.Join(strings.Fields(bl.text[m[2]:m[3]]), " ")
			if rest, ok := strings.CutPrefix(span, "make "); ok {
				c.checkMake(line, rest, report)
			}
			c.checkPaths(line, span, report)
			c.checkFlags(line, span, report)
			c.checkInstall(rel, line, span, report)
			for _, name := range metric.FindAllString(span, -1) {
				if !c.metricKnown(name) {
					report(line, "metric %s is named by no Go source of the repository", name)
				}
			}
		}
	}
	return problems, nil
}

// checkMake checks the targets of one make command line (the words after "make" up to the first
// that is no target: an option, a variable assignment, a redirection).
func (c *checker) checkMake(line int, args string, report func(int, string, ...any)) {
	for w := range strings.FieldsSeq(args) {
		if strings.Contains(w, "=") {
			continue
		}
		if !target.MatchString(w) {
			return
		}
		if !c.targets[w] {
			report(line, "make target %q is not defined by the Makefile", w)
		}
	}
}

func (c *checker) checkLink(fromAbs, dest string, line int, report func(int, string, ...any)) error {
	if strings.Contains(dest, "://") || strings.HasPrefix(dest, "mailto:") {
		report(line, "link %s leaves the repository: the docs link only to the repository's own files", dest)
		return nil
	}
	path, frag, _ := strings.Cut(dest, "#")
	targetAbs := fromAbs
	if path != "" {
		targetAbs = filepath.Join(filepath.Dir(fromAbs), filepath.FromSlash(path))
		if _, err := os.Stat(targetAbs); err != nil {
			report(line, "link %s: file %s does not exist", dest, path)
			return nil
		}
	}
	if frag == "" || !strings.HasSuffix(targetAbs, ".md") {
		return nil
	}
	anchors, err := c.anchorsOf(targetAbs)
	if err != nil {
		return err
	}
	if !anchors[frag] {
		report(line, "link %s: no heading of %s has the anchor #%s", dest, filepath.Base(targetAbs), frag)
	}
	return nil
}

// checkFlags checks each --flag of a code span that is no other program's command: one of the
// project's binaries must define it.
func (c *checker) checkFlags(line int, span string, report func(int, string, ...any)) {
	if otherTool.MatchString(span) && !strings.HasPrefix(span, "kubectl aether") {
		return
	}
	for _, m := range flagUse.FindAllStringSubmatch(span, -1) {
		if !c.flags[m[1]] && otherPrograms[m[1]] == "" {
			report(line, "flag --%s is defined by none of the project's binaries", m[1])
		}
	}
}

// checkPaths checks each word of a code span that looks like a repository path: it contains a
// slash and starts with a top-level directory of the repository.
func (c *checker) checkPaths(line int, span string, report func(int, string, ...any)) {
	for _, w := range strings.FieldsFunc(span, func(r rune) bool { return strings.ContainsRune(" \t(),;=:\"'`", r) }) {
		w = strings.TrimPrefix(w, "./")
		w = strings.TrimRight(w, ".")
		first, _, ok := strings.Cut(w, "/")
		if !ok || !c.topDirs[first] || strings.ContainsAny(w, "*<>{}$[]") {
			continue
		}
		if _, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(w))); err == nil {
			continue
		}
		// A Go identifier of a package (internal/registration.Verify): the package must exist.
		if pkg, ident, ok := strings.Cut(w, "."); ok && goIdent.MatchString(ident) {
			if st, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(pkg))); err == nil && st.IsDir() {
				continue
			}
		}
		report(line, "path %s does not exist in the repository", w)
	}
}

// metricKnown: the name, or for a histogram's series the histogram's, is a string in Go source.
func (c *checker) metricKnown(name string) bool {
	candidates := []string{name}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			candidates = append(candidates, base)
		}
	}
	for _, n := range candidates {
		if strings.Contains(c.goSource, `"`+n+`"`) {
			return true
		}
	}
	return false
}
