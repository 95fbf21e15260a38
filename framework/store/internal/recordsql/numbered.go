package recordsql

import (
	"strconv"
	"strings"
)

// numberedSQL is a statement of named arguments (@name) spelled with
// PostgreSQL's numbered placeholders, names[i] the argument of $i+1, or
// with positional ones (?), names[i] the argument of the i-th.
type numberedSQL struct {
	sql   string
	names []string
}

// numberArgs spells sql's named arguments (@ and a name of letters,
// digits and underscores) as $1, $2, … (one number per name, however often
// it occurs).
func numberArgs(sql string) numberedSQL {
	num := map[string]int{}
	return spellArgs(sql, func(q *numberedSQL, name string) string {
		n, ok := num[name]
		if !ok {
			q.names = append(q.names, name)
			n = len(q.names)
			num[name] = n
		}
		return "$" + strconv.Itoa(n)
	})
}

// positionalArgs spells sql's named arguments as ?, one an occurrence,
// for a database without numbered placeholders (the MySQL family).
func positionalArgs(sql string) numberedSQL {
	return spellArgs(sql, func(q *numberedSQL, name string) string {
		q.names = append(q.names, name)
		return "?"
	})
}

// spellArgs replaces each named argument of sql by what placeholder
// returns for it, which also records its name in the statement's names.
func spellArgs(sql string, placeholder func(q *numberedSQL, name string) string) numberedSQL {
	var (
		b   strings.Builder
		out numberedSQL
	)
	for i := 0; i < len(sql); i++ {
		if sql[i] != '@' {
			b.WriteByte(sql[i])
			continue
		}
		j := i + 1
		for j < len(sql) && nameByte(sql[j]) {
			j++
		}
		b.WriteString(placeholder(&out, sql[i+1:j]))
		i = j - 1
	}
	out.sql = b.String()
	return out
}

// nameByte reports whether c continues an argument's name: a letter, a
// digit or an underscore.
func nameByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// values returns args in the order of the placeholders.
func (q numberedSQL) values(args map[string]any) []any {
	out := make([]any, len(q.names))
	for i, name := range q.names {
		out[i] = args[name]
	}
	return out
}
