package collection_test

import (
	"context"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"
)

// statements is a gorm logger that records the text of every statement
// reported to it: given to the application's own handle ([ownHandle]),
// it sees the framework's statements on resource rows, the reads of a
// row by its key among them, so that a test counts what a request sent.
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) LogMode(gormlogger.LogLevel) gormlogger.Interface { return s }
func (s *statements) Info(context.Context, string, ...any)             {}
func (s *statements) Warn(context.Context, string, ...any)             {}
func (s *statements) Error(context.Context, string, ...any)            {}

func (s *statements) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	sql, _ := fc()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, sql)
}

// reads returns how many of the statements recorded since the last call
// read rows of table (a SELECT that names it), and forgets them all.
func (s *statements) reads(table string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sql := range s.sql {
		if strings.HasPrefix(strings.TrimSpace(sql), "SELECT") && strings.Contains(sql, table) {
			n++
		}
	}
	s.sql = nil
	return n
}

// countStatements makes the store on the application's own handle (as
// [ownHandle]) whose gorm logger records its statements in s.
func countStatements(s *statements) func(*setupOptions) {
	return func(o *setupOptions) { o.own = &gorm.Config{Logger: s} }
}
