package store

import (
	"fmt"
	"time"
)

// DatabaseTime receives the value of [Dialect.Now] from a row: a timestamp
// (PostgreSQL) or SQLite's UTC text. Time is in UTC.
type DatabaseTime struct{ Time time.Time }

// sqliteTime is the layout of SQLite's strftime('%Y-%m-%d %H:%M:%f').
const sqliteTime = "2006-01-02 15:04:05.999999999"

// Scan implements sql.Scanner.
func (t *DatabaseTime) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		t.Time = v.UTC()
		return nil
	case string:
		return t.parse(v)
	case []byte:
		return t.parse(string(v))
	}
	return fmt.Errorf("store: a database time cannot be read from %T", src)
}

func (t *DatabaseTime) parse(s string) error {
	v, err := time.ParseInLocation(sqliteTime, s, time.UTC)
	if err != nil {
		return fmt.Errorf("store: database time %q: %w", s, err)
	}
	t.Time = v
	return nil
}
