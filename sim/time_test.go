package sim

import "testing"

func TestTimeString(t *testing.T) {
	for _, tc := range []struct {
		t    Time
		want string
	}{
		{0, "0ns"},
		{1, "1ns"},
		{999, "999ns"},
		{1000, "1us"},
		{1500, "1.5us"},
		{1001, "1.001us"},
		{2*Millisecond + 1, "2.000001ms"},
		{3 * Second, "3s"},
		{3*Second + 1, "3.000000001s"},
		{-1500, "-1.5us"},
		{Never, "never"},
	} {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("Time(%d).String() = %q, want %q", int64(tc.t), got, tc.want)
		}
	}
}
