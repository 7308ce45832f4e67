package udpref

import "golang.org/x/sys/unix"

// mmsghdr is struct mmsghdr of sendmmsg(2) and recvmmsg(2): a message
// header and the bytes the kernel moved for it. Go lays it out as C does
// (Len after Hdr, padded to Hdr's alignment). It is defined here rather
// than taken from x/sys, whose unix.Mmsghdr first appears in a release
// that requires Go 1.26; this keeps the module buildable with Go 1.25.
type mmsghdr struct {
	Hdr unix.Msghdr
	Len uint32
}
