package experiment

import (
	"encoding/json"
	"strconv"
)

// sigDigits is the precision of floats in CSV and JSON: enough for any
// measurement, and it keeps the output stable where the last bits of a
// float would differ between platforms.
const sigDigits = 6

// formatFloat writes f rounded to sigDigits significant digits, without
// an exponent.
func formatFloat(f float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', sigDigits, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// text writes a value for CSV: nil is empty.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		return formatFloat(x)
	}
	panic("experiment: column value of unexpected type")
}

// jsonValue writes a value for JSON: nil is null, strings are quoted.
func jsonValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return text(v)
}

// cell writes a value for the text table: nil is "-", floats have the
// column's decimals.
func cell(c *Column, v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case float64:
		if c.Prec >= 0 {
			return strconv.FormatFloat(x, 'f', c.Prec, 64)
		}
	}
	return text(v)
}
