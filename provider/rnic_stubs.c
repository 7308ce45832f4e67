/*
 * Verbs programs import that rnic's library does not run yet: each fails
 * with EOPNOTSUPP, the errno libibverbs documents for what a device does
 * not support, so that a program loads and says what it could not do.
 */
#define _GNU_SOURCE
#include <errno.h>

#include <infiniband/verbs.h>

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	errno = EOPNOTSUPP;
	return NULL;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	return EOPNOTSUPP;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	errno = EOPNOTSUPP;
	return -1;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
}
