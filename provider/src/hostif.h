/*
 * The C side of rnic's host interface (internal/hostif/proto.go is the
 * definition): one SOCK_SEQPACKET datagram per request and reply, a
 * 16-byte header (magic "RN", op, seq, errno, length) and little-endian
 * fields. The constants and operation numbers are rnic_abi.h's,
 * generated from the Go definition.
 */
#ifndef RNIC_HOSTIF_H
#define RNIC_HOSTIF_H

#include <stddef.h>
#include <stdint.h>

#include "rnic_abi.h"

/* A message being built or read. */
struct hostif_msg {
	uint8_t b[HOSTIF_MAX_MSG];
	size_t len; /* built: bytes so far; read: bytes in the message */
	size_t off; /* read: the next field */
	int err;    /* a field past the end (read) or past HOSTIF_MAX_MSG (build) */
};

void hostif_begin(struct hostif_msg *m, uint16_t op, uint32_t seq);
void hostif_u8(struct hostif_msg *m, uint8_t v);
void hostif_u16(struct hostif_msg *m, uint16_t v);
void hostif_u32(struct hostif_msg *m, uint32_t v);
/* hostif_put appends n bytes as they are; hostif_bytes appends them
 * after their length (u16). */
void hostif_put(struct hostif_msg *m, const void *p, size_t n);
void hostif_bytes(struct hostif_msg *m, const void *p, size_t n);
void hostif_u64(struct hostif_msg *m, uint64_t v);
uint8_t hostif_get_u8(struct hostif_msg *m);
uint16_t hostif_get_u16(struct hostif_msg *m);
uint32_t hostif_get_u32(struct hostif_msg *m);
uint64_t hostif_get_u64(struct hostif_msg *m);
const uint8_t *hostif_get(struct hostif_msg *m, size_t n);

/* hostif_run_dir writes the run directory, as rnic nic chooses it
 * (RNIC_RUN_DIR, else $XDG_RUNTIME_DIR/rnic, else $TMPDIR/rnic-UID). */
void hostif_run_dir(char *out, size_t n);

/* hostif_connect connects to a NIC's socket; -1 and errno on failure. */
int hostif_connect(const char *path);
/* hostif_call sends m and reads the reply into m; it returns 0, the
 * reply's errno (positive), or -1 with errno set. fds receives up to
 * *nfds descriptors the reply carried (*nfds is set to how many). */
int hostif_call(int fd, struct hostif_msg *m, int *fds, int *nfds);

int hostif_hello(int fd);
/* hostif_hello_args appends a HELLO's fields: the version, and the
 * address of this process's probe word, which the NIC reads to check
 * that it may reach the program's memory (internal/hostif.ProbeWord). */
void hostif_hello_args(struct hostif_msg *m);
int hostif_query_gid(int fd, uint8_t port, uint32_t index, uint8_t gid[16]);

#endif
