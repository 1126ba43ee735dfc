// Package sqlitewrap helps tests wrap the SQLite driver the store uses
// (modernc.org/sqlite) to watch or disturb what the store asks of it: a
// wrapper embeds the Conn that Open returns and overrides what it needs,
// and is registered with database/sql under a name of its own, which the
// store takes as sqlite.Options.Driver.
package sqlitewrap

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"

	_ "modernc.org/sqlite" // registers "sqlite"
)

// Conn is what database/sql uses of a modernc.org/sqlite connection.
type Conn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.SessionResetter
	driver.Validator
	driver.Pinger
}

var base = sync.OnceValues(func() (driver.Driver, error) {
	db, err := sql.Open("sqlite", "")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return db.Driver(), nil
})

// Open opens a connection to name with the driver database/sql knows as
// "sqlite".
func Open(name string) (Conn, error) {
	d, err := base()
	if err != nil {
		return nil, err
	}
	c, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	wc, ok := c.(Conn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("sqlitewrap: %T lacks the methods a wrapper embeds", c)
	}
	return wc, nil
}

// Driver is a driver whose connections are the real driver's, each
// wrapped by the function: sql.Register(name, sqlitewrap.Driver(wrap)).
type Driver func(Conn) driver.Conn

// Open implements driver.Driver.
func (wrap Driver) Open(name string) (driver.Conn, error) {
	c, err := Open(name)
	if err != nil {
		return nil, err
	}
	return wrap(c), nil
}
