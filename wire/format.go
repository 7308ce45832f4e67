package wire

import "strconv"

// itoa and hexString keep the String methods free of fmt.

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func hexString(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }
