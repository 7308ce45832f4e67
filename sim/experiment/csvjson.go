package experiment

import (
	"bufio"
	"encoding/csv"
	"io"
	"strings"
)

// WriteCSV writes a header of column names and one line per row.
func WriteCSV(w io.Writer, cols []Column, rows []Row) error {
	cw := csv.NewWriter(w)
	rec := make([]string, len(cols))
	for i := range cols {
		rec[i] = cols[i].Name
	}
	if err := cw.Write(rec); err != nil {
		return err
	}
	for r := range rows {
		for i := range cols {
			rec[i] = text(cols[i].Value(&rows[r]))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes an array with one object per row, one per line, its
// keys in the columns' order; a missing value is null.
func WriteJSON(w io.Writer, cols []Column, rows []Row) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("[")
	var obj strings.Builder
	for r := range rows {
		obj.Reset()
		if r > 0 {
			obj.WriteString(",")
		}
		obj.WriteString("\n  {")
		for i := range cols {
			if i > 0 {
				obj.WriteString(", ")
			}
			obj.WriteString(jsonValue(cols[i].Name))
			obj.WriteString(": ")
			obj.WriteString(jsonValue(cols[i].Value(&rows[r])))
		}
		obj.WriteString("}")
		bw.WriteString(obj.String())
	}
	bw.WriteString("\n]\n")
	return bw.Flush()
}
