package collection

import (
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// System holds the columns the PUT engine keeps on every resource row. A
// resource model gets them by embedding System:
//
//	type Customer struct {
//		System
//		Name  string `json:"name" validate:"required,max=100"`
//		Email string `json:"email" validate:"required,email"`
//	}
//
// The primary key is (tenant_id, id): the unique key that makes a create
// converge. gorm's AutoMigrate of such a model creates that key, the list
// index (tenant_id, created_at, id) and the status filter index (tenant_id,
// status, created_at, id), named after the model's table. The fields are
// left out of JSON, so a model that is also the command cannot receive them
// from a request body; the engine alone writes them.
type System struct {
	// TenantID is the tenant the row belongs to.
	TenantID string `gorm:"column:tenant_id;primaryKey;not null;index:,composite:list,priority:1;index:,composite:status,priority:1" json:"-"`
	// ID is the client-chosen UUID of the resource.
	ID uuid.UUID `gorm:"column:id;primaryKey;type:uuid;not null;index:,composite:list,priority:3;index:,composite:status,priority:4" json:"-"`
	// Version starts at 1 and goes up by one with every write.
	Version int64 `gorm:"column:version;not null" json:"-"`
	// Status is the lifecycle state ("draft", "active"); a replace guard
	// reads it.
	Status string `gorm:"column:status;not null;index:,composite:status,priority:2" json:"-"`
	// CreateFingerprint is the fingerprint of the creating request.
	CreateFingerprint string `gorm:"column:create_fingerprint;not null" json:"-"`
	// Fingerprint is the fingerprint of the request that wrote the current
	// business columns.
	Fingerprint string `gorm:"column:fingerprint;not null" json:"-"`
	// CreatedAt is when the resource was created, on the database clock
	// (UTC, in its precision: microseconds on PostgreSQL and MariaDB,
	// milliseconds on SQLite), cut to the precision of the table's column
	// where it keeps fewer digits (a DATETIME(3)), so that it is the time
	// the column stores.
	CreatedAt time.Time `gorm:"column:created_at;not null;autoCreateTime:false;index:,composite:list,priority:2;index:,composite:status,priority:3" json:"-"`
	// UpdatedAt is when it was last written, on the database clock.
	UpdatedAt time.Time `gorm:"column:updated_at;not null;autoUpdateTime:false" json:"-"`
	// DeletedAt is set by DELETE, on the database clock: the row is a
	// tombstone from then on.
	DeletedAt *time.Time `gorm:"column:deleted_at" json:"-"`
}

// SystemColumns returns s. Models embedding [System] get this method, which
// is how the engine reaches their system columns without reflection.
func (s *System) SystemColumns() *System { return s }

// Row is implemented by a pointer to any model that embeds [System].
type Row interface{ SystemColumns() *System }

// ETag is the resource's strong entity tag: it changes with every write
// (version and a prefix of the fingerprint) and differs between two
// incarnations of one ID (the creation time, in microseconds), even when
// a re-created resource has the body of the deleted one.
func (s *System) ETag() string {
	fp := s.Fingerprint
	if i := strings.IndexByte(fp, ':'); i >= 0 && len(fp) >= i+9 {
		fp = fp[i+1 : i+9]
	}
	return `"` + strconv.FormatInt(s.Version, 10) + "-" + fp + "-" + strconv.FormatInt(s.CreatedAt.UnixMicro(), 36) + `"`
}

// parseETag splits an ETag of [System.ETag], "VERSION-FP-CREATED", into its
// version and its creation stamp.
func parseETag(tag string) (version int64, created string, ok bool) {
	tag, ok = strings.CutPrefix(tag, `"`)
	if !ok {
		return 0, "", false
	}
	if tag, ok = strings.CutSuffix(tag, `"`); !ok {
		return 0, "", false
	}
	first := strings.IndexByte(tag, '-')
	last := strings.LastIndexByte(tag, '-')
	if first <= 0 || last <= first {
		return 0, "", false
	}
	v, err := strconv.ParseInt(tag[:first], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return v, tag[last+1:], true
}

// normalize puts the timestamps read back from a driver into UTC, so that a
// representation rendered from a read row is byte-identical to the one
// rendered when the row was written.
func (s *System) normalize() {
	s.CreatedAt = s.CreatedAt.UTC()
	s.UpdatedAt = s.UpdatedAt.UTC()
	if s.DeletedAt != nil {
		t := s.DeletedAt.UTC()
		s.DeletedAt = &t
	}
}
