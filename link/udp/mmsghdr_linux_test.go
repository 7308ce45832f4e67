package udp

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMmsghdrLayout: mmsghdr has struct mmsghdr's layout (msg_len right
// after msg_hdr, the whole padded to the pointer size: 64 bytes on 64-bit
// Linux, 32 on 32-bit), or sendmmsg/recvmmsg would read the wrong headers.
func TestMmsghdrLayout(t *testing.T) {
	var m mmsghdr
	ptr := unsafe.Sizeof(uintptr(0))
	want := map[uintptr]uintptr{8: 64, 4: 32}[ptr]
	if got := unsafe.Sizeof(m); got != want {
		t.Errorf("sizeof(mmsghdr) = %d, want %d", got, want)
	}
	if got := unsafe.Offsetof(m.Len); got != unsafe.Sizeof(unix.Msghdr{}) {
		t.Errorf("offsetof(Len) = %d, want sizeof(msghdr) %d", got, unsafe.Sizeof(unix.Msghdr{}))
	}
}
