package transport

import (
	"errors"
	"fmt"
	"strings"
)

// QPType is a QP's transport service; values of enum ibv_qp_type.
type QPType uint8

const (
	RC QPType = 2
	UC QPType = 3
	UD QPType = 4
)

func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPState is a QP's state; values of enum ibv_qp_state.
//
//	         modify            modify           modify
//	RESET ----------> INIT ----------> RTR ----------> RTS <-----> SQD
//	  ^                                                 |   error
//	  |  any state --modify--> RESET                    v   (UC/UD)
//	  |  any state --modify or fatal error--> ERR      SQE --modify--> RTS
type QPState uint8

const (
	QPSReset QPState = iota
	QPSInit
	QPSRTR
	QPSRTS
	QPSSQD
	QPSSQE
	QPSErr
	numQPStates
)

var qpStateNames = [numQPStates]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if s < numQPStates {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// AttrMask says which QPAttr fields a Modify sets; values of enum
// ibv_qp_attr_mask.
type AttrMask uint32

const (
	AttrState            AttrMask = 1 << 0
	AttrCurState         AttrMask = 1 << 1
	AttrEnSQDAsyncNotify AttrMask = 1 << 2
	AttrAccessFlags      AttrMask = 1 << 3
	AttrPKeyIndex        AttrMask = 1 << 4
	AttrPort             AttrMask = 1 << 5
	AttrQKey             AttrMask = 1 << 6
	AttrAV               AttrMask = 1 << 7
	AttrPathMTU          AttrMask = 1 << 8
	AttrTimeout          AttrMask = 1 << 9
	AttrRetryCnt         AttrMask = 1 << 10
	AttrRNRRetry         AttrMask = 1 << 11
	AttrRQPSN            AttrMask = 1 << 12
	AttrMaxQPRdAtomic    AttrMask = 1 << 13
	AttrAltPath          AttrMask = 1 << 14
	AttrMinRNRTimer      AttrMask = 1 << 15
	AttrSQPSN            AttrMask = 1 << 16
	AttrMaxDestRdAtomic  AttrMask = 1 << 17
	AttrPathMigState     AttrMask = 1 << 18
	AttrCap              AttrMask = 1 << 19
	AttrDestQPN          AttrMask = 1 << 20
	AttrRateLimit        AttrMask = 1 << 25
)

var attrNames = [...]string{
	"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX", "PORT", "QKEY",
	"AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC",
	"ALT_PATH", "MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN",
}

func (m AttrMask) String() string {
	var parts []string
	for i, n := range attrNames {
		if m&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if m&AttrRateLimit != 0 {
		parts = append(parts, "RATE_LIMIT")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// transition is one cell of the QP state table: whether the move is legal
// and which attributes it requires or allows, per QP type. This is the
// table of IB core's qp_state_table (drivers/infiniband/core/verbs.c),
// itself IBTA Vol 1 §11.2.4.2 (Modify QP).
type transition struct {
	valid    bool
	required [5]AttrMask // indexed by QPType (RC=2, UC=3, UD=4)
	optional [5]AttrMask
}

func perType(rc, uc, ud AttrMask) [5]AttrMask { return [5]AttrMask{RC: rc, UC: uc, UD: ud} }

var qpTransitions = func() (t [numQPStates][numQPStates]transition) {
	for s := QPSReset; s < numQPStates; s++ {
		t[s][QPSReset] = transition{valid: true}
		t[s][QPSErr] = transition{valid: true}
	}
	t[QPSReset][QPSInit] = transition{valid: true,
		required: perType(AttrPKeyIndex|AttrPort|AttrAccessFlags, AttrPKeyIndex|AttrPort|AttrAccessFlags, AttrPKeyIndex|AttrPort|AttrQKey)}
	t[QPSInit][QPSInit] = transition{valid: true,
		optional: perType(AttrPKeyIndex|AttrPort|AttrAccessFlags, AttrPKeyIndex|AttrPort|AttrAccessFlags, AttrPKeyIndex|AttrPort|AttrQKey)}
	t[QPSInit][QPSRTR] = transition{valid: true,
		required: perType(AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer,
			AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN, 0),
		optional: perType(AttrAltPath|AttrAccessFlags|AttrPKeyIndex, AttrAltPath|AttrAccessFlags|AttrPKeyIndex, AttrPKeyIndex|AttrQKey)}
	t[QPSRTR][QPSRTS] = transition{valid: true,
		required: perType(AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrSQPSN|AttrMaxQPRdAtomic, AttrSQPSN, AttrSQPSN),
		optional: perType(AttrCurState|AttrAltPath|AttrAccessFlags|AttrMinRNRTimer|AttrPathMigState,
			AttrCurState|AttrAltPath|AttrAccessFlags|AttrPathMigState, AttrCurState|AttrQKey)}
	rtsOpt := perType(AttrCurState|AttrAccessFlags|AttrAltPath|AttrPathMigState|AttrMinRNRTimer,
		AttrCurState|AttrAccessFlags|AttrAltPath|AttrPathMigState, AttrCurState|AttrQKey)
	t[QPSRTS][QPSRTS] = transition{valid: true, optional: rtsOpt}
	t[QPSRTS][QPSSQD] = transition{valid: true, optional: perType(AttrEnSQDAsyncNotify, AttrEnSQDAsyncNotify, AttrEnSQDAsyncNotify)}
	t[QPSSQD][QPSRTS] = transition{valid: true, optional: rtsOpt}
	t[QPSSQD][QPSSQD] = transition{valid: true, optional: perType(
		AttrPort|AttrAV|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic|AttrMaxDestRdAtomic|AttrAltPath|AttrAccessFlags|AttrPKeyIndex|AttrMinRNRTimer|AttrPathMigState,
		AttrAV|AttrAltPath|AttrAccessFlags|AttrPKeyIndex|AttrPathMigState,
		AttrPKeyIndex|AttrQKey)}
	t[QPSSQE][QPSRTS] = transition{valid: true, optional: perType(0, AttrCurState|AttrAccessFlags, AttrCurState|AttrQKey)}
	return t
}()

// ErrTransition is wrapped by every refused Modify.
var ErrTransition = errors.New("invalid QP state transition")

// checkTransition validates a Modify against the state table, as
// ib_modify_qp_is_ok does.
func checkTransition(t QPType, cur, next QPState, mask AttrMask) error {
	if t != RC && t != UC && t != UD {
		return fmt.Errorf("%w: unknown QP type %v", ErrTransition, t)
	}
	if next >= numQPStates {
		return fmt.Errorf("%w: unknown state %d", ErrTransition, next)
	}
	tr := qpTransitions[cur][next]
	if !tr.valid {
		return fmt.Errorf("%w: %v QP cannot go from %v to %v", ErrTransition, t, cur, next)
	}
	if next == QPSSQE {
		return fmt.Errorf("%w: only the NIC moves a QP to SQE", ErrTransition)
	}
	req, opt := tr.required[t], tr.optional[t]
	given := mask &^ AttrState
	if missing := req &^ given; missing != 0 {
		return fmt.Errorf("%w: %v QP %v->%v requires %v", ErrTransition, t, cur, next, missing)
	}
	if extra := given &^ (req | opt); extra != 0 {
		return fmt.Errorf("%w: %v QP %v->%v does not take %v", ErrTransition, t, cur, next, extra)
	}
	return nil
}
