package sqlite

import "strings"

// rowsPerStatement are the sizes of the multi-row statements that ingest
// (deliveries), the sequencer and Finish write their rows with, largest
// first: n rows take n/32 statements plus one per set bit of n%32 (a
// statement per row cost about as much as the row itself).
var rowsPerStatement = [...]int{32, 16, 8, 4, 2, 1}

// multiRow is one statement in each of rowsPerStatement's sizes.
type multiRow [len(rowsPerStatement)]string

// multiRows is the statement head + tuple + tail with tuple repeated
// (comma-separated) for each of rowsPerStatement's numbers of rows.
func multiRows(head, tuple, tail string) (qs multiRow) {
	for k, n := range rowsPerStatement {
		qs[k] = head + tuple + strings.Repeat(", "+tuple, n-1) + tail
	}
	return qs
}

// chunks calls fn for consecutive runs [i, i+size) covering n rows, each
// size one of rowsPerStatement (k its index), largest first.
func chunks(n int, fn func(k, i, size int) error) error {
	for i, k := 0, 0; i < n; i += rowsPerStatement[k] {
		for rowsPerStatement[k] > n-i {
			k++
		}
		if err := fn(k, i, rowsPerStatement[k]); err != nil {
			return err
		}
	}
	return nil
}

// insertRows inserts n rows with qs in as few statements as chunks
// allows; row appends row i's values to args.
func insertRows(st *stmts, qs *multiRow, n int, row func(i int, args []any) []any) error {
	var args []any
	return chunks(n, func(k, i, size int) error {
		args = args[:0]
		for j := i; j < i+size; j++ {
			args = row(j, args)
		}
		_, err := st.exec(qs[k], args...)
		return err
	})
}
