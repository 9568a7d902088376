package batches

import (
	"context"
	"errors"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// A batch's reservation of its budgets (pkg/spend reserve.go), held for its
// life. The create reserves the batch's worst case (its dry run's estimate)
// against its key's and team's max budgets, in the transaction that creates
// it. Each line gives back an equal share (Share) as it is committed: the
// share rides the chunk's progress like the line counts do (progress.go),
// shown while the chunk runs and taken back if its run dies, committed
// with the chunk's piece — so a line's share is given back exactly once,
// whatever crashes and redeliveries happen. The write that ends the batch
// (Service.change), however it ends, releases what is left, once.

// reserveDoc is a batch's reservation: NUSD nano-USD in each scope, Share
// of it per line, Released once the batch's end gave the rest back.
type reserveDoc struct {
	spend.Reservation
	Share    int64 `json:"share"`
	Released bool  `json:"released,omitempty"`
}

// taken is a create's reservation: the record's (nil: none), the writes
// that take it, and the estimate it is of (USD).
type taken struct {
	doc    *reserveDoc
	writes []store.Write
	cost   float64
}

// failed is the error of a create whose transaction failed with err: a
// failed condition of the reservation's is the budget taken by batches
// created meanwhile (400 budget_exceeded).
func (t taken) failed(err error) error {
	if errors.Is(err, store.ErrConditionFailed) && len(t.writes) > 0 {
		return spend.ExceededRace(t.cost)
	}
	return err
}

// reserve takes nb's worst-case cost (its dry run's; the batch prices for
// a native batch when known) of p's budgets: the reservation to record and
// its writes, to go in the create's transaction; none when p has no max
// budget or the batch no known cost. A file the estimate cannot read is
// left to the create's own checks.
func (s *Service) reserve(ctx context.Context, p auth.Principal, nb NewBatch) (taken, error) {
	if s.deps.Budget == nil || !s.deps.Budget.Budgeted(p) {
		return taken{}, nil
	}
	est, err := s.Estimate(ctx, p, nb)
	var ae *api.Error
	if errors.As(err, &ae) {
		return taken{}, nil
	}
	if err != nil {
		return taken{}, err
	}
	cost := est.EstimatedCost.Engine
	native := nb.Provider != "" || nb.Model != ""
	if n := est.EstimatedCost.Native; n != nil && native {
		cost = *n
	}
	r, writes, err := s.deps.Budget.Reserve(ctx, p, cost)
	if err != nil || !r.Holds() {
		return taken{cost: cost}, err
	}
	d := &reserveDoc{Reservation: r}
	if !native && est.Lines > 0 {
		// A native batch's lines are not settled one by one: its end
		// releases the whole.
		d.Share = r.NUSD / int64(est.Lines)
	}
	return taken{doc: d, writes: writes, cost: cost}, nil
}

// took tells the budgets a create's reservation was taken.
func (s *Service) took(t taken) {
	if t.doc != nil && s.deps.Budget != nil {
		s.deps.Budget.Took(t.doc.Reservation)
	}
}

// released tells the budgets the write that ended the batch gave back what
// was left of its reservation.
func (s *Service) released(st *state) {
	if r := st.doc.Reserve; r != nil && s.deps.Budget != nil {
		s.deps.Budget.Released(r.Reservation)
	}
}

// release is the writes that give back what the batch's lines left of its
// reservation, for the write that ends it; it marks the reservation
// released. None when there is nothing to give back.
func (st *state) release() []store.Write {
	r := st.doc.Reserve
	if r == nil || r.Released {
		return nil
	}
	r.Released = true
	// Every lease is gone once a batch ends (committed or closed): its
	// lines' shares are all in the committed counter.
	return r.Adds(-max(r.NUSD-st.counters[ctrSettled], 0))
}

// reserveAdds are the writes that take delta nano-USD more of the batch's
// budgets (negative: give back), none when it reserved nothing.
func (d *batchDoc) reserveAdds(delta int64) []store.Write {
	if d.Reserve == nil || delta == 0 {
		return nil
	}
	return d.Reserve.Adds(delta)
}

// ownReserve is what the batch's lines do not count against their own
// budgets, USD: the whole of its reservation. Not what is left of it: that
// and the scope's reservations are read at different moments, and a line
// must never be refused for its own batch's reservation. Other batches'
// reservations are undercounted for the line by the shares its batch gave
// back — which its lines' spend, counted, stands for.
func (st *state) ownReserve() float64 {
	r := st.doc.Reserve
	if r == nil || r.Released {
		return 0
	}
	return spend.USD(r.NUSD)
}
