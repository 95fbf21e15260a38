// Package storemysql is the MySQL family's database driver of the store
// (MariaDB 10.6 and later), and the only package of the framework that
// imports gorm.io/driver/mysql and github.com/go-sql-driver/mysql.
//
// [Config] turns a mysql:// URL into the driver's configuration: times
// parsed in UTC, utf8mb4, a UTC session time zone and a strict sql_mode,
// whatever the URL says. [OpenDB] opens a database/sql pool on it for
// migrations and administration.
package storemysql
