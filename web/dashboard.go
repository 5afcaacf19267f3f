package web

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// statsStore is what the dashboard asks of storage.
type statsStore interface {
	// DeliveryStats counts every delivery, those not yet rolled up by the background
	// loop included; it writes nothing.
	DeliveryStats(ctx context.Context, from, to time.Time, step time.Duration) ([]storage.StatBucket, error)
	StuckCounts(ctx context.Context, stuckBefore time.Time) (map[string]int, error)
	RecentDuplicates(ctx context.Context, since time.Time, limit int) ([]storage.Delivery, error)
}

// dashRange is one of the dashboard's periods: n buckets of step, or n calendar days.
type dashRange struct {
	name, label string
	step        time.Duration // a bucket's length; of a calendar day, its usual one
	n           int
	tick        int    // label every tick-th bucket
	format      string // its label's layout
	// days makes the buckets calendar days in the console's location: summer time makes
	// two of them a year 23 and 25 hours long, which a fixed step would spill over.
	days bool
}

var dashRanges = []dashRange{
	{"24h", "24 hours", time.Hour, 24, 3, "15:04", false},
	{"7d", "7 days", 6 * time.Hour, 28, 4, "Mon 2", false},
	{"30d", "30 days", 24 * time.Hour, 30, 5, "Jan 2", true},
}

// otherSources labels deliveries to names no source has (rejected with 404).
const otherSources = "(unknown sources)"

func (s *Server) handleDashboard(w http.ResponseWriter, r *http.Request) error {
	rg, err := parseDashRange(r.URL.Query().Get("range"))
	if err != nil {
		return err
	}
	now := s.now()
	bounds := dashBounds(rg, now.In(s.loc))
	d, err := s.dashboardData(r.Context(), rg, bounds, now.Add(-s.stuck))
	if err != nil {
		return err
	}
	v := s.dashboardView(rg, bounds, d)
	v.Page = s.page(r, "Dashboard", "dashboard")
	v.ClockWarning = s.clockWarning()
	return s.render(w, r, http.StatusOK, views.DashboardView(v))
}

// parseDashRange returns the range named name ("24h", "7d", "30d"); "" is 7d.
func parseDashRange(name string) (dashRange, error) {
	if name == "" {
		return dashRanges[1], nil
	}
	i := slices.IndexFunc(dashRanges, func(d dashRange) bool { return d.name == name })
	if i < 0 {
		return dashRange{}, badRequest("Unknown range: choose 24h, 7d or 30d.")
	}
	return dashRanges[i], nil
}

// dashBounds returns where the range's buckets start at now, and where the last ends:
// n+1 times, ascending, the last bucket the one that holds now. Days are calendar days
// in now's location, whatever their length; other buckets start on a whole step.
func dashBounds(rg dashRange, now time.Time) []time.Time {
	bounds := make([]time.Time, rg.n+1)
	if rg.days {
		y, m, d := now.Date()
		for i := range bounds {
			bounds[i] = time.Date(y, m, d-rg.n+1+i, 0, 0, 0, 0, now.Location())
		}
		return bounds
	}
	end := now.Truncate(rg.step).Add(rg.step)
	for i := range bounds {
		bounds[i] = end.Add(-time.Duration(rg.n-i) * rg.step)
	}
	return bounds
}

// bucketOf returns which of the buckets that bounds delimit (dashBounds) holds a
// period of storage's totals that starts at start: the last to start at or before it.
// Storage counts by the hour of UTC, so in a zone whose offset is not a whole number of
// hours (India's +05:30) an hour straddles each local midnight: it goes to the day that
// holds its start, and the window's first hour, which starts before the window, to the
// first day (with the half hour before the window: storage cannot split an hour). Every
// period storage returns for the window overlaps it, so every one has a bucket: the
// chart's bars add up to the totals.
func bucketOf(bounds []time.Time, start time.Time) int {
	starts := bounds[:len(bounds)-1]
	i := sort.Search(len(starts), func(i int) bool { return starts[i].After(start) })
	return max(i-1, 0)
}

// dashData is what the dashboard shows, as storage gives it.
type dashData struct {
	stats    []storage.StatBucket
	stuck    map[string]int // stuck keys by source
	caught   []storage.Delivery
	suspects []storage.SuspectCount
}

func (s *Server) dashboardData(ctx context.Context, rg dashRange, bounds []time.Time, stuckBefore time.Time) (dashData, error) {
	var d dashData
	var err error
	from, end := bounds[0], bounds[len(bounds)-1]
	step := rg.step
	if rg.days {
		// Storage's periods are whole hours from the window's start; a day that summer
		// time lengthens or shortens is not, so its hours are placed by bucketOf.
		step = time.Hour
	}
	if d.stats, err = s.stats.DeliveryStats(ctx, from, end, step); err != nil {
		return dashData{}, err
	}
	if d.stuck, err = s.stats.StuckCounts(ctx, stuckBefore); err != nil {
		return dashData{}, err
	}
	if d.caught, err = s.stats.RecentDuplicates(ctx, from, 10); err != nil {
		return dashData{}, err
	}
	if d.suspects, err = s.suspects.SuspectCounts(ctx); err != nil {
		return dashData{}, err
	}
	return d, nil
}

// dashCounts are one source's deliveries over the range (or all sources' together).
type dashCounts struct {
	acc, dup, rej, mm, moneyN int64
	moneyMM                   int64 // money mismatches
	// money is summed by currency, never across them, exactly in its minor units as the
	// ledger sums money caught, amounts it cannot sum counted as unsummed.
	money   map[string]storage.Money
	buckets []views.ChartBucket // one per step; not kept for the totals
}

// add counts b into c.
func (c *dashCounts) add(b storage.StatBucket) {
	switch b.Outcome {
	case storage.Accepted:
		c.acc += b.Deliveries
	case storage.Duplicate:
		c.dup += b.Deliveries
		if b.WithAmount > 0 {
			if c.money == nil {
				c.money = map[string]storage.Money{}
			}
			m := c.money[b.Currency]
			m.Add(b.Money())
			c.money[b.Currency] = m
			c.moneyN += b.WithAmount
		}
	case storage.Rejected:
		c.rej += b.Deliveries
	}
	c.mm += b.Mismatches
	c.moneyMM += b.MoneyMismatches
}

// tally sums stats by source, in the configured sources' order, deliveries to names no
// source has under otherSources (last), and over all sources, into the buckets that
// bounds delimit (dashBounds).
func (s *Server) tally(rg dashRange, bounds []time.Time, stats []storage.StatBucket) (order []string, bySource map[string]*dashCounts, total dashCounts) {
	bySource = map[string]*dashCounts{}
	order = s.sourceNames()
	get := func(name string) *dashCounts {
		c := bySource[name]
		if c == nil {
			c = &dashCounts{buckets: make([]views.ChartBucket, rg.n)}
			for i := range c.buckets {
				start := bounds[i]
				if i%rg.tick == 0 {
					c.buckets[i].Label = start.Format(rg.format)
				}
				if rg.days {
					c.buckets[i].Long = start.Format("Mon Jan 2")
				} else {
					c.buckets[i].Long = start.Format("Mon Jan 2 15:04") + " – " + bounds[i+1].Format("15:04")
				}
			}
			bySource[name] = c
		}
		return c
	}
	for _, name := range order {
		get(name)
	}
	for _, b := range stats {
		name := b.Source
		if _, ok := s.source(name); !ok {
			name = otherSources
		}
		c := get(name)
		i := bucketOf(bounds, b.Start)
		c.add(b)
		total.add(b)
		switch b.Outcome {
		case storage.Accepted:
			c.buckets[i].Accepted += b.Deliveries
		case storage.Duplicate:
			c.buckets[i].Duplicate += b.Deliveries
		case storage.Rejected:
			c.buckets[i].Rejected += b.Deliveries
		}
	}
	if _, ok := bySource[otherSources]; ok {
		order = append(order, otherSources)
	}
	return order, bySource, total
}

// dashboardView builds the dashboard (all but its Page) from d, over the range rg in
// the buckets that bounds delimit (dashBounds).
func (s *Server) dashboardView(rg dashRange, bounds []time.Time, d dashData) views.Dashboard {
	order, bySource, tot := s.tally(rg, bounds, d.stats)
	// With its offset: the 24 hours can start in the hour that comes twice when summer
	// time ends, which a wall-clock time would read as its later instant.
	since := bounds[0].Format(time.RFC3339)
	events := func(q url.Values) string {
		q.Set("from", since)
		return "/events?" + q.Encode()
	}
	v := views.Dashboard{
		Range: rg.name,
		Empty: tot.acc+tot.dup+tot.rej == 0,
		Totals: views.Totals{
			Accepted: tot.acc, Duplicate: tot.dup, Rejected: tot.rej, Mismatch: tot.mm,
			DuplicateRate: views.Percent(tot.dup, tot.acc+tot.dup),
			Money:         minorSums(tot.money), MoneyCount: tot.moneyN,
			DuplicatesURL: events(url.Values{"outcome": {"duplicate"}}),
			// The duplicates the money sums, as the ledger's money caught links them:
			// every one that carried an amount, whatever its event's status.
			MoneyURL:      events(maps.Clone(ledgerFilters["caught"])),
			MismatchURL:   events(url.Values{"mismatch": {"1"}}),
			MoneyMismatch: tot.moneyMM, MoneyMismatchURL: events(url.Values{"mismatch": {"money"}}),
			RejectedURL: events(url.Values{"outcome": {"rejected"}}),
			StuckURL:    "/keys?state=stuck",
		},
	}
	for _, r := range dashRanges {
		v.Ranges = append(v.Ranges, views.Link{Label: r.label, URL: "/?range=" + r.name, Active: r.name == rg.name})
	}
	for _, n := range d.stuck {
		v.Totals.Stuck += n
	}
	for i, name := range order {
		c := bySource[name]
		st := views.SourceStats{
			Name: name, Accepted: c.acc, Duplicate: c.dup, Rejected: c.rej, Mismatch: c.mm,
			DuplicateRate: views.Percent(c.dup, c.acc+c.dup),
			Money:         minorSums(c.money), MoneyCount: c.moneyN,
			Stuck:         d.stuck[name],
			EventsURL:     events(url.Values{"source": {name}}),
			DuplicatesURL: events(url.Values{"source": {name}, "outcome": {"duplicate"}}),
			StuckURL:      "/keys?" + url.Values{"state": {"stuck"}, "source": {name}}.Encode(),
			Chart: views.NewChart("chart-"+string(rune('a'+i%26))+itoa(i),
				"Deliveries of "+name+" per "+humanDuration(rg.step)+", last "+rg.label, c.buckets),
		}
		if name == otherSources {
			st.EventsURL = events(url.Values{"outcome": {"rejected"}})
		}
		v.Sources = append(v.Sources, st)
	}
	for _, dup := range d.caught {
		v.Caught = append(v.Caught, s.eventRow(dup))
	}
	if len(d.suspects) > 0 {
		v.Suspects = suspectStats(d.suspects)
		v.SuspectsURL, v.LedgerURL = "/suspects", "/ledger"
	}
	return v
}

// clockWarning says, when the senders' signed timestamps of the last hour are more than
// a minute off this machine's clock (the median of them), that the clock is likely
// wrong: past a source's tolerance every delivery of a timestamped scheme is refused.
// "" when they are not, or nothing says.
func (s *Server) clockWarning() string {
	if s.clockSkew == nil {
		return ""
	}
	median, n := s.clockSkew()
	if n == 0 || median >= -time.Minute && median <= time.Minute {
		return ""
	}
	// The skew is the senders' time minus ours: senders ahead means this clock is behind.
	deliveries := "deliveries"
	if n == 1 {
		deliveries = "delivery"
	}
	way, by := "behind", median
	if median < 0 {
		way, by = "ahead of", -median
	}
	return fmt.Sprintf("This machine's clock seems %s %s the senders': signed deliveries more than the tolerance "+
		"(5 min unless configured) off are refused. Median of %d signed %s in the last hour.", skewText(by), way, n, deliveries)
}

// skewText writes a positive skew to the second: "2 min 5 s", "1 h 3 min".
func skewText(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, sec := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	switch {
	case h > 0 && m > 0:
		return fmt.Sprintf("%d h %d min", h, m)
	case h > 0:
		return fmt.Sprintf("%d h", h)
	case sec > 0:
		return fmt.Sprintf("%d min %d s", m, sec)
	}
	return fmt.Sprintf("%d min", m)
}
