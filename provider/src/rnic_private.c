/*
 * rdma-core's private interface (IBVERBS_PRIVATE_34): what its providers
 * import from libibverbs (the ibv_cmd_* kernel commands, the driver
 * registration). Debian's perftest links libmlx5 and libefa, which import
 * these, so the library must define them for those libraries to load;
 * they serve mlx5 and EFA devices only and are never called for rnic's,
 * except verbs_register_driver_34, which the providers' constructors
 * call to register with libibverbs (here: ignored, as rnic's devices are
 * the only ones). Each fails with EOPNOTSUPP and returns 0 (NULL for the
 * ones returning pointers) if called. This file does not include
 * <infiniband/verbs.h>: rdma-core's driver.h, which declares them, is not
 * installed.
 */
#include <errno.h>

#define UNSUPPORTED(name)                  \
	long name(void);                   \
	long name(void)                    \
	{                                  \
		errno = EOPNOTSUPP;        \
		return 0;                  \
	}

UNSUPPORTED(__verbs_log)
UNSUPPORTED(_verbs_init_and_alloc_context)
UNSUPPORTED(execute_ioctl)
UNSUPPORTED(ibv_cmd_advise_mr)
UNSUPPORTED(ibv_cmd_alloc_dm)
UNSUPPORTED(ibv_cmd_alloc_mw)
UNSUPPORTED(ibv_cmd_alloc_pd)
UNSUPPORTED(ibv_cmd_attach_mcast)
UNSUPPORTED(ibv_cmd_close_xrcd)
UNSUPPORTED(ibv_cmd_create_ah)
UNSUPPORTED(ibv_cmd_create_counters)
UNSUPPORTED(ibv_cmd_create_cq_ex)
UNSUPPORTED(ibv_cmd_create_flow)
UNSUPPORTED(ibv_cmd_create_flow_action_esp)
UNSUPPORTED(ibv_cmd_create_qp_ex)
UNSUPPORTED(ibv_cmd_create_qp_ex2)
UNSUPPORTED(ibv_cmd_create_rwq_ind_table)
UNSUPPORTED(ibv_cmd_create_srq)
UNSUPPORTED(ibv_cmd_create_srq_ex)
UNSUPPORTED(ibv_cmd_create_wq)
UNSUPPORTED(ibv_cmd_dealloc_mw)
UNSUPPORTED(ibv_cmd_dealloc_pd)
UNSUPPORTED(ibv_cmd_dereg_mr)
UNSUPPORTED(ibv_cmd_destroy_ah)
UNSUPPORTED(ibv_cmd_destroy_counters)
UNSUPPORTED(ibv_cmd_destroy_cq)
UNSUPPORTED(ibv_cmd_destroy_flow)
UNSUPPORTED(ibv_cmd_destroy_flow_action)
UNSUPPORTED(ibv_cmd_destroy_qp)
UNSUPPORTED(ibv_cmd_destroy_rwq_ind_table)
UNSUPPORTED(ibv_cmd_destroy_srq)
UNSUPPORTED(ibv_cmd_destroy_wq)
UNSUPPORTED(ibv_cmd_detach_mcast)
UNSUPPORTED(ibv_cmd_free_dm)
UNSUPPORTED(ibv_cmd_get_context)
UNSUPPORTED(ibv_cmd_modify_cq)
UNSUPPORTED(ibv_cmd_modify_flow_action_esp)
UNSUPPORTED(ibv_cmd_modify_qp)
UNSUPPORTED(ibv_cmd_modify_qp_ex)
UNSUPPORTED(ibv_cmd_modify_srq)
UNSUPPORTED(ibv_cmd_modify_wq)
UNSUPPORTED(ibv_cmd_open_qp)
UNSUPPORTED(ibv_cmd_open_xrcd)
UNSUPPORTED(ibv_cmd_query_context)
UNSUPPORTED(ibv_cmd_query_device_any)
UNSUPPORTED(ibv_cmd_query_mr)
UNSUPPORTED(ibv_cmd_query_port)
UNSUPPORTED(ibv_cmd_query_qp)
UNSUPPORTED(ibv_cmd_query_srq)
UNSUPPORTED(ibv_cmd_read_counters)
UNSUPPORTED(ibv_cmd_reg_dm_mr)
UNSUPPORTED(ibv_cmd_reg_dmabuf_mr)
UNSUPPORTED(ibv_cmd_reg_mr)
UNSUPPORTED(ibv_cmd_rereg_mr)
UNSUPPORTED(ibv_cmd_resize_cq)
_Bool verbs_allow_disassociate_destroy; /* a variable in rdma-core */
UNSUPPORTED(verbs_init_cq)
UNSUPPORTED(verbs_open_device)
UNSUPPORTED(verbs_register_driver_34)
UNSUPPORTED(verbs_set_ops)
UNSUPPORTED(verbs_uninit_context)

/* Public symbols declared in no installed header. */
UNSUPPORTED(ibv_copy_ah_attr_from_kern)
UNSUPPORTED(ibv_copy_qp_attr_from_kern)
UNSUPPORTED(ibv_copy_path_rec_from_kern)
UNSUPPORTED(ibv_get_sysfs_path)
