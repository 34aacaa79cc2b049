// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring

import (
	"fmt"
	"slices"
	"strings"
)

// labelListKeywords are PromQL's keywords followed by a parenthesized list of label names, which
// are no metric names: sum by (controller) (...).
var labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// keywords are PromQL's other words that are no metric names: its operators and its aggregation
// operators (sum by (x) (...) puts a keyword between the word and its parenthesis).
var keywords = []string{
	"bool", "and", "or", "unless", "offset", "inf", "nan", "start", "end", "step",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
}

// MetricNames are the metric names a PromQL expression (or a promtool series, metric{labels})
// selects, sorted, each once. It reads the expression as PromQL's lexer would: strings, label
// matchers ({...}), ranges ([...]) and numbers (durations too) are skipped; a word followed by
// '(' is a function or an aggregation; by, without, on, ignoring, group_left and group_right
// take a list of label names. A selector by __name__ alone is not understood: it is an error, so
// that no query escapes the check.
func MetricNames(expr string) ([]string, error) {
	var names []string
	skipLabelList := false
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end := closing(expr, i, '{', '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: unclosed {", expr)
			}
			if strings.Contains(expr[i:end], "__name__") {
				return nil, fmt.Errorf("%q: a selector by __name__ is not read; name the metric before the braces", expr)
			}
			i = end + 1
		case c == '[':
			end := closing(expr, i, '[', ']')
			if end < 0 {
				return nil, fmt.Errorf("%q: unclosed [", expr)
			}
			i = end + 1
		case c == '(' && skipLabelList:
			end := closing(expr, i, '(', ')')
			if end < 0 {
				return nil, fmt.Errorf("%q: unclosed (", expr)
			}
			i, skipLabelList = end+1, false
		case isDigit(c) || (c == '.' && i+1 < len(expr) && isDigit(expr[i+1])):
			for i < len(expr) && (isWordChar(expr[i]) || expr[i] == '.') {
				i++
			}
		case isWordStart(c):
			start := i
			for i < len(expr) && isWordChar(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := nextNonSpace(expr, i)
			switch {
			case slices.Contains(labelListKeywords, word):
				skipLabelList = true
			case slices.Contains(keywords, word) || next == '(':
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
		default:
			i++
		}
	}
	slices.Sort(names)
	return names, nil
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isWordStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isWordChar(c byte) bool  { return isWordStart(c) || isDigit(c) }

// nextNonSpace is the first byte at or after i that is not white space, 0 at the end.
func nextNonSpace(s string, i int) byte {
	for ; i < len(s); i++ {
		if s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
			return s[i]
		}
	}
	return 0
}

// skipString is the index just past the string literal opening at i.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%q: unclosed string at offset %d", s, i)
}

// closing is the index of the bracket closing the one at i (strings inside skipped), -1 if none.
func closing(s string, i int, open, close byte) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			end, err := skipString(s, j)
			if err != nil {
				return -1
			}
			j = end - 1
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}
