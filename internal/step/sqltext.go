package step

import (
	"database/sql/driver"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// DescribeSQL is the statement with its arguments in place of the ?s, its
// comments and line breaks taken out: "SELECT GET_LOCK('locklab:lock', 5)".
func DescribeSQL(query string, args []driver.NamedValue) string {
	var lines []string
	for _, l := range strings.Split(query, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
			lines = append(lines, t)
		}
	}
	q := strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
	var b strings.Builder
	n := 0
	for _, r := range q { // a ? inside a quoted literal would be miscounted: the locks' statements have none
		if r == '?' && n < len(args) {
			b.WriteString(sqlValue(args[n].Value))
			n++
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	if len(out) > maxSQL {
		out = out[:maxSQL] + "…"
	}
	return out
}

func sqlValue(v driver.Value) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + strings.ReplaceAll(cutArg(v), "'", "''") + "'"
	case []byte:
		return "'" + strings.ReplaceAll(cutArg(string(v)), "'", "''") + "'"
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case time.Time:
		return "'" + v.Format("2006-01-02 15:04:05.999999") + "'"
	}
	return fmt.Sprint(v)
}

func cutArg(s string) string {
	if len(s) > maxArg {
		return s[:maxArg] + "…"
	}
	return s
}

// execReply is a statement's reply, mysql-like: "1 row affected", "OK".
func execReply(res driver.Result, err error) string {
	if err != nil {
		return "(error) " + err.Error()
	}
	if res == nil {
		return "OK"
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "OK"
	}
	s := fmt.Sprintf("%d rows affected", n)
	if n == 1 {
		s = "1 row affected"
	}
	// A statement that changed nothing may still report one (the db
	// lock's VALUES sets LAST_INSERT_ID(1) on a duplicate too): nothing
	// was inserted, and the lock does not read it.
	if id, err := res.LastInsertId(); err == nil && id != 0 && n > 0 {
		s += fmt.Sprintf(", last insert id %d", id)
	}
	return s
}

// bufRows are a query's rows, read inside its step.
type bufRows struct {
	cols []string
	rows [][]driver.Value
}

// buffer reads every row of rows and closes them.
func buffer(rows driver.Rows) (*bufRows, error) {
	b := &bufRows{cols: rows.Columns()}
	defer rows.Close()
	for {
		row := make([]driver.Value, len(b.cols))
		err := rows.Next(row)
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		for i, v := range row { // the driver may reuse its buffers
			if bs, ok := v.([]byte); ok {
				row[i] = append([]byte(nil), bs...)
			}
		}
		b.rows = append(b.rows, row)
	}
}

func (b *bufRows) Columns() []string { return b.cols }

func (b *bufRows) Close() error { b.rows = nil; return nil }

func (b *bufRows) Next(dest []driver.Value) error {
	if len(b.rows) == 0 {
		return io.EOF
	}
	copy(dest, b.rows[0])
	b.rows = b.rows[1:]
	return nil
}

// reply is the rows in short: one value alone ("1", "NULL"), else each
// row's values in parentheses, or "(no rows)".
func (b *bufRows) reply() string {
	if len(b.rows) == 0 {
		return "(no rows)"
	}
	show := func(v driver.Value) string {
		if bs, ok := v.([]byte); ok {
			return cutArg(string(bs))
		}
		if v == nil {
			return "NULL"
		}
		return cutArg(fmt.Sprint(v))
	}
	if len(b.rows) == 1 && len(b.cols) == 1 {
		return show(b.rows[0][0])
	}
	rows := make([]string, len(b.rows))
	for i, r := range b.rows {
		vals := make([]string, len(r))
		for j, v := range r {
			vals[j] = show(v)
		}
		rows[i] = "(" + strings.Join(vals, ", ") + ")"
	}
	return strings.Join(rows, ", ")
}
