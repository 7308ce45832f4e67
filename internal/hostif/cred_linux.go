package hostif

import (
	"net"

	"golang.org/x/sys/unix"
)

// PeerCred returns the credentials of the program at the other end of a
// NIC socket's connection (SO_PEERCRED): who it serves.
func PeerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	return cred, cerr
}
