package step

import (
	"context"
	"database/sql/driver"
	"errors"
)

// Connector is the gate in a database/sql pool (sql.OpenDB(step.Connector(c))):
// a statement of an armed sale stops before it is sent and is recorded with
// its reply ("SELECT GET_LOCK('locklab:lock', 5) -> 1", "UPDATE ... -> 1 row
// affected"); any other goes straight through after one context lookup. One
// connector covers every version on the database without code in the locks.
//
// Gated: ExecContext and QueryContext on a connection (what db.ExecContext,
// db.QueryRowContext and a sql.Conn's send), a ping, and a transaction's
// BEGIN, COMMIT and ROLLBACK. Not gated, as go-redis's connection set-up is
// not: a connection's dial, its session's reset, and a statement prepared
// explicitly (db.PrepareContext: no lock does).
//
// A statement the driver sends prepared (a driver that does not interpolate
// the arguments answers driver.ErrSkip) is one step all the same: its
// prepare, execution and close are sent inside it, as database/sql would.
// A query's rows are read inside its step, to show them, and handed on from
// memory: the locks' queries answer one row.
func Connector(c driver.Connector) driver.Connector { return connector{c} }

type connector struct{ c driver.Connector }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &sqlConn{conn}, nil
}

func (c connector) Driver() driver.Driver { return c.c.Driver() }

// sqlConn is a connection of the pool with the gate. It passes on every
// optional interface database/sql looks for that the driver's has.
type sqlConn struct{ driver.Conn }

var (
	_ driver.ExecerContext      = (*sqlConn)(nil)
	_ driver.QueryerContext     = (*sqlConn)(nil)
	_ driver.ConnPrepareContext = (*sqlConn)(nil)
	_ driver.ConnBeginTx        = (*sqlConn)(nil)
	_ driver.Pinger             = (*sqlConn)(nil)
	_ driver.SessionResetter    = (*sqlConn)(nil)
	_ driver.Validator          = (*sqlConn)(nil)
	_ driver.NamedValueChecker  = (*sqlConn)(nil)
)

func (c *sqlConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s := From(ctx)
	if s == nil {
		if e, ok := c.Conn.(driver.ExecerContext); ok {
			return e.ExecContext(ctx, query, args)
		}
		return nil, driver.ErrSkip
	}
	var res driver.Result
	var err error
	if serr := s.Run(ctx, DescribeSQL(query, args), func() string {
		res, err = c.exec(ctx, query, args)
		return execReply(res, err)
	}); serr != nil {
		return nil, serr
	}
	return res, err
}

// exec sends the statement as database/sql would: directly, or prepared
// when the driver skips that.
func (c *sqlConn) exec(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := c.Conn.(driver.ExecerContext); ok {
		res, err := e.ExecContext(ctx, query, args)
		if !errors.Is(err, driver.ErrSkip) {
			return res, err
		}
	}
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	se, ok := st.(driver.StmtExecContext)
	if !ok {
		return nil, errors.New("step: the driver's statement takes no context")
	}
	return se.ExecContext(ctx, args)
}

func (c *sqlConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s := From(ctx)
	if s == nil {
		if q, ok := c.Conn.(driver.QueryerContext); ok {
			return q.QueryContext(ctx, query, args)
		}
		return nil, driver.ErrSkip
	}
	var rows driver.Rows
	var err error
	if serr := s.Run(ctx, DescribeSQL(query, args), func() string {
		rows, err = c.query(ctx, query, args)
		if err != nil {
			return "(error) " + err.Error()
		}
		var buf *bufRows
		buf, err = buffer(rows)
		rows = buf
		if err != nil {
			return "(error) " + err.Error()
		}
		return buf.reply()
	}); serr != nil {
		return nil, serr
	}
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (c *sqlConn) query(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := c.Conn.(driver.QueryerContext); ok {
		rows, err := q.QueryContext(ctx, query, args)
		if !errors.Is(err, driver.ErrSkip) {
			return rows, err
		}
	}
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	sq, ok := st.(driver.StmtQueryContext)
	if !ok {
		st.Close()
		return nil, errors.New("step: the driver's statement takes no context")
	}
	rows, err := sq.QueryContext(ctx, args)
	if err != nil {
		st.Close()
		return nil, err
	}
	return stmtRows{rows, st}, nil
}

// stmtRows closes the statement a query prepared once its rows are closed.
type stmtRows struct {
	driver.Rows
	st driver.Stmt
}

func (r stmtRows) Close() error {
	err := r.Rows.Close()
	return errors.Join(err, r.st.Close())
}

func (c *sqlConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Prepare(query)
}

func (c *sqlConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	begin := func() (driver.Tx, error) {
		if b, ok := c.Conn.(driver.ConnBeginTx); ok {
			return b.BeginTx(ctx, opts)
		}
		return c.Begin() //nolint:staticcheck // the driver's only way
	}
	s := From(ctx)
	if s == nil {
		return begin()
	}
	var tx driver.Tx
	var err error
	if serr := s.Run(ctx, "BEGIN", func() string { tx, err = begin(); return execReply(nil, err) }); serr != nil {
		return nil, serr
	}
	if err != nil {
		return nil, err
	}
	return sqlTx{tx, s, ctx}, nil
}

// sqlTx is a transaction of an armed sale: driver.Tx's Commit and Rollback
// take no context, so it keeps the sale and the context BeginTx was given.
type sqlTx struct {
	tx  driver.Tx
	s   *Sale
	ctx context.Context
}

func (t sqlTx) Commit() error   { return t.end("COMMIT", t.tx.Commit) }
func (t sqlTx) Rollback() error { return t.end("ROLLBACK", t.tx.Rollback) }

func (t sqlTx) end(what string, do func() error) error {
	var err error
	if serr := t.s.Run(t.ctx, what, func() string { err = do(); return execReply(nil, err) }); serr != nil {
		// Refused (the sale cancelled): the transaction is still open on
		// its connection; rolling it back sends nothing the story needs.
		if what == "COMMIT" {
			_ = t.tx.Rollback()
		}
		return serr
	}
	return err
}

func (c *sqlConn) Ping(ctx context.Context) error {
	ping := func() error {
		if p, ok := c.Conn.(driver.Pinger); ok {
			return p.Ping(ctx)
		}
		return nil
	}
	s := From(ctx)
	if s == nil {
		return ping()
	}
	var err error
	if serr := s.Run(ctx, "PING", func() string { err = ping(); return execReply(nil, err) }); serr != nil {
		return serr
	}
	return err
}

func (c *sqlConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *sqlConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *sqlConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip // database/sql's default conversion
}

// maxSQL is the longest statement shown whole.
const maxSQL = 240
