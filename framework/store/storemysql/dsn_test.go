package storemysql

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigFromURL(t *testing.T) {
	t.Parallel()
	cfg, err := Config("mysql://app:s%40cret@db.internal/shop?tls=skip-verify", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "s@cret" || cfg.Addr != "db.internal:3306" || cfg.DBName != "shop" || cfg.Net != "tcp" {
		t.Fatalf("config = %+v", cfg)
	}
	if !cfg.ParseTime || cfg.Loc != time.UTC || cfg.Timeout != 3*time.Second || cfg.TLSConfig != "skip-verify" {
		t.Fatalf("parseTime %v loc %v timeout %v tls %q", cfg.ParseTime, cfg.Loc, cfg.Timeout, cfg.TLSConfig)
	}
	if cfg.Params["time_zone"] != "'+00:00'" || !strings.Contains(cfg.FormatDSN(), "charset=utf8mb4") || !strings.Contains(cfg.Params["sql_mode"], "STRICT_ALL_TABLES") {
		t.Fatalf("params = %v", cfg.Params)
	}
	// The URL cannot turn off what the framework needs.
	cfg, err = Config("mysql://root@127.0.0.1:3307/x?parseTime=false&loc=Local&timeout=9s", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.ParseTime || cfg.Loc != time.UTC || cfg.Timeout != 9*time.Second || cfg.Addr != "127.0.0.1:3307" {
		t.Fatalf("config = %+v", cfg)
	}
}

func TestConfigRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://x@y/z",
		"mysql:///db",
		"mysql://h/a/b",
		"mysql://u:p@h/db?timeout=soon",
		"mysql://u:secret@h:port/db",
	} {
		_, err := Config(dsn, time.Second)
		if !errors.Is(err, ErrDSN) {
			t.Errorf("Config(%q) = %v, want ErrDSN", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Config(%q) error quotes the password: %v", dsn, err)
		}
	}
}
