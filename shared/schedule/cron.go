package schedule

import (
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// EventBridge's cron fields and their bounds.
const (
	minYear = 1970
	maxYear = 2199
)

var (
	monthNames   = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	weekdayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
)

// cron is a parsed cron expression: a set per field, as bits. Exactly one
// of dom and dow is nil (the field that is "?").
type cron struct {
	minutes uint64    // bit m, 0-59
	hours   uint64    // bit h, 0-23
	months  uint64    // bit m, 1-12
	years   [4]uint64 // bit y-minYear
	dom     *domSet
	dow     *dowSet
}

// domSet is a day-of-month field.
type domSet struct {
	days        uint64 // bit d, 1-31
	fromLast    uint64 // bit n: the n-th day before the last ("L" is n=0, "L-3" n=3)
	lastWeekday bool   // "LW": the last weekday (Monday to Friday) of the month
	nearest     uint64 // bit n: "nW", the weekday nearest day n, within the month
}

// dowSet is a day-of-week field; weekdays are time.Weekday (Sunday 0).
type dowSet struct {
	days   uint64    // bit w
	lastOf uint64    // bit w: "wL", the last such weekday of the month
	nth    [7]uint64 // bit n of nth[w]: "w#n", the n-th such weekday (1-5)
}

// field is how one plain field (no L, W, #, ?) reads.
type field struct {
	name     string
	min, max int
	names    []string // names of min, min+1, ...; nil for none
}

var (
	minutesField = field{name: "minutes", min: 0, max: 59}
	hoursField   = field{name: "hours", min: 0, max: 23}
	domField     = field{name: "day-of-month", min: 1, max: 31}
	monthsField  = field{name: "month", min: 1, max: 12, names: monthNames}
	dowField     = field{name: "day-of-week", min: 1, max: 7, names: weekdayNames}
	yearsField   = field{name: "year", min: minYear, max: maxYear}
)

func parseCron(body string) (*cron, error) {
	parts := strings.Split(body, " ")
	if len(parts) != 6 {
		return nil, invalid("cron: must have six fields separated by single spaces (minutes hours day-of-month month day-of-week year), not %d", len(parts))
	}
	c := &cron{}
	var err error
	set := func(f field, s string) uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = f.parseList(s)
		return v
	}
	c.minutes = set(minutesField, parts[0])
	c.hours = set(hoursField, parts[1])
	c.months = set(monthsField, parts[3])
	if err != nil {
		return nil, err
	}
	if c.years, err = parseYears(parts[5]); err != nil {
		return nil, err
	}
	domAny, dowAny := parts[2] == "?", parts[4] == "?"
	switch {
	case domAny && dowAny:
		return nil, invalid("cron: only one of day-of-month and day-of-week may be \"?\"")
	case !domAny && !dowAny:
		return nil, invalid("cron: one of day-of-month and day-of-week must be \"?\" (EventBridge takes only one of them)")
	case dowAny:
		c.dom, err = parseDOM(parts[2])
	default:
		c.dow, err = parseDOW(parts[4])
	}
	if err != nil {
		return nil, err
	}
	if _, ok := c.next(time.Date(minYear, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Minute)); !ok {
		return nil, invalid("cron: the expression is never due (no date matches all its fields)")
	}
	return c, nil
}

// parseList reads a comma-separated list of "*", "v" and "a-b", each with
// an optional "/step", as a set with bit v-f.min for value v.
func (f field) parseList(s string) (uint64, error) {
	if s == "" {
		return 0, invalid("cron: %s: empty", f.name)
	}
	var set uint64
	for _, item := range strings.Split(s, ",") {
		lo, hi, step, err := f.parseItem(item)
		if err != nil {
			return 0, err
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << uint(v-f.min)
		}
	}
	return set, nil
}

// parseItem reads "*", "v", "a-b", "*/n", "v/n" or "a-b/n" into the values
// lo, lo+step, ... up to hi.
func (f field) parseItem(item string) (lo, hi, step int, err error) {
	base, stepText, hasStep := strings.Cut(item, "/")
	step = 1
	if hasStep {
		n, ok := number(stepText)
		if !ok || n < 1 || n > f.max-f.min+1 {
			return 0, 0, 0, invalid("cron: %s: %q: the increment after \"/\" must be a whole number from 1 to %d", f.name, item, f.max-f.min+1)
		}
		step = n
	}
	switch a, b, isRange := strings.Cut(base, "-"); {
	case base == "*":
		return f.min, f.max, step, nil
	case isRange:
		if lo, err = f.value(a); err != nil {
			return 0, 0, 0, err
		}
		if hi, err = f.value(b); err != nil {
			return 0, 0, 0, err
		}
		if lo > hi {
			return 0, 0, 0, invalid("cron: %s: range %q runs backwards; split it in two (e.g. 22-23,0-2)", f.name, base)
		}
		return lo, hi, step, nil
	default:
		if lo, err = f.value(base); err != nil {
			return 0, 0, 0, err
		}
		if hasStep {
			return lo, f.max, step, nil
		}
		return lo, lo, step, nil
	}
}

// value reads one number (or upper-case name) of the field.
func (f field) value(s string) (int, error) {
	for i, name := range f.names {
		if s == name {
			return f.min + i, nil
		}
	}
	n, ok := number(s)
	if !ok || n < f.min || n > f.max {
		if f.names != nil {
			return 0, invalid("cron: %s: %q must be %d-%d or %s-%s (upper case)", f.name, s, f.min, f.max, f.names[0], f.names[len(f.names)-1])
		}
		return 0, invalid("cron: %s: %q must be a whole number from %d to %d", f.name, s, f.min, f.max)
	}
	return n, nil
}

// number reads one to four decimal digits.
func number(s string) (int, bool) {
	if s == "" || len(s) > 4 || !allDigits(s) {
		return 0, false
	}
	n, _ := strconv.Atoi(s)
	return n, true
}

func parseYears(s string) ([4]uint64, error) {
	var set [4]uint64
	if s == "" {
		return set, invalid("cron: year: empty")
	}
	for _, item := range strings.Split(s, ",") {
		lo, hi, step, err := yearsField.parseItem(item)
		if err != nil {
			return set, err
		}
		for v := lo; v <= hi; v += step {
			i := v - minYear
			set[i/64] |= 1 << uint(i%64)
		}
	}
	return set, nil
}

func parseDOM(s string) (*domSet, error) {
	d := &domSet{}
	if s == "" {
		return nil, invalid("cron: day-of-month: empty")
	}
	for _, item := range strings.Split(s, ",") {
		switch {
		case item == "L":
			d.fromLast |= 1
		case item == "LW":
			d.lastWeekday = true
		case strings.HasPrefix(item, "L-"):
			n, ok := number(item[2:])
			if !ok || n < 1 || n > 30 {
				return nil, invalid("cron: day-of-month: %q: \"L-n\" takes n from 1 to 30", item)
			}
			d.fromLast |= 1 << uint(n)
		case strings.HasSuffix(item, "W"):
			n, ok := number(item[:len(item)-1])
			if !ok || n < 1 || n > 31 {
				return nil, invalid("cron: day-of-month: %q: \"nW\" takes a day n from 1 to 31", item)
			}
			d.nearest |= 1 << uint(n)
		default:
			v, err := domField.parseList(item)
			if err != nil {
				return nil, err
			}
			d.days |= v << 1 // bit d for day d
		}
	}
	return d, nil
}

func parseDOW(s string) (*dowSet, error) {
	d := &dowSet{}
	if s == "" {
		return nil, invalid("cron: day-of-week: empty")
	}
	for _, item := range strings.Split(s, ",") {
		switch {
		case item == "L":
			return nil, invalid("cron: day-of-week: \"L\" alone is ambiguous; write SAT (or 7), or \"nL\" for the last such day of the month (e.g. FRIL or 6L)")
		case strings.HasSuffix(item, "L"):
			w, err := dowField.value(item[:len(item)-1])
			if err != nil {
				return nil, err
			}
			d.lastOf |= 1 << uint(w-1)
		case strings.Contains(item, "#"):
			day, nth, _ := strings.Cut(item, "#")
			w, err := dowField.value(day)
			if err != nil {
				return nil, err
			}
			n, ok := number(nth)
			if !ok || n < 1 || n > 5 {
				return nil, invalid("cron: day-of-week: %q: \"day#n\" takes n from 1 to 5", item)
			}
			d.nth[w-1] |= 1 << uint(n)
		default:
			v, err := dowField.parseList(item)
			if err != nil {
				return nil, err
			}
			d.days |= v // bit w-1 for field value w: time.Weekday
		}
	}
	return d, nil
}

func lastDay(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func weekday(y int, m time.Month, d int) time.Weekday {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday()
}

// nearestWeekday is the day "nW" names in y-m: n itself on Monday to
// Friday, else the nearest weekday within the month; 0 when the month has
// no day n.
func nearestWeekday(y int, m time.Month, n int) int {
	last := lastDay(y, m)
	if n > last {
		return 0
	}
	switch weekday(y, m, n) {
	case time.Saturday:
		if n == 1 {
			return 3 // Monday
		}
		return n - 1
	case time.Sunday:
		if n == last {
			return n - 2 // Friday
		}
		return n + 1
	}
	return n
}

func (s *domSet) match(y int, m time.Month, d int) bool {
	last := lastDay(y, m)
	if s.days&(1<<uint(d)) != 0 {
		return true
	}
	if n := last - d; n >= 0 && s.fromLast&(1<<uint(n)) != 0 {
		return true
	}
	if s.lastWeekday {
		lw := last
		for weekday(y, m, lw) == time.Saturday || weekday(y, m, lw) == time.Sunday {
			lw--
		}
		if d == lw {
			return true
		}
	}
	for rest := s.nearest; rest != 0; rest &= rest - 1 {
		if nearestWeekday(y, m, bits.TrailingZeros64(rest)) == d {
			return true
		}
	}
	return false
}

func (s *dowSet) match(y int, m time.Month, d int) bool {
	w := uint(weekday(y, m, d))
	if s.days&(1<<w) != 0 {
		return true
	}
	if s.lastOf&(1<<w) != 0 && d+7 > lastDay(y, m) {
		return true
	}
	return s.nth[w]&(1<<uint((d-1)/7+1)) != 0
}

func (c *cron) yearMatch(y int) bool {
	i := y - minYear
	return i >= 0 && y <= maxYear && c.years[i/64]&(1<<uint(i%64)) != 0
}

func (c *cron) dayMatch(y int, m time.Month, d int) bool {
	if !c.yearMatch(y) || c.months&(1<<uint(m-1)) == 0 {
		return false
	}
	if c.dom != nil {
		return c.dom.match(y, m, d)
	}
	return c.dow.match(y, m, d)
}

// minuteOfDay is the first (up true) or last time of day, as minutes since
// midnight, within [from, to] that the hours and minutes fields hold.
func (c *cron) minuteOfDay(from, to int, up bool) (int, bool) {
	for i := 0; i <= to-from; i++ {
		t := from + i
		if !up {
			t = to - i
		}
		if c.hours&(1<<uint(t/60)) != 0 && c.minutes&(1<<uint(t%60)) != 0 {
			return t, true
		}
	}
	return 0, false
}

func at(y int, m time.Month, d, minute int) time.Time {
	return time.Date(y, m, d, minute/60, minute%60, 0, 0, time.UTC)
}

// next is the first due time after t.
func (c *cron) next(t time.Time) (time.Time, bool) {
	t = t.Truncate(time.Minute).Add(time.Minute)
	y, m, d := t.Date()
	from := t.Hour()*60 + t.Minute()
	for ; y <= maxYear; y, m, d, from = y+1, time.January, 1, 0 {
		if !c.yearMatch(y) {
			continue
		}
		for ; m <= time.December; m, d, from = m+1, 1, 0 {
			if c.months&(1<<uint(m-1)) == 0 {
				continue
			}
			for last := lastDay(y, m); d <= last; d, from = d+1, 0 {
				if !c.dayMatch(y, m, d) {
					continue
				}
				if min, ok := c.minuteOfDay(from, 24*60-1, true); ok {
					return at(y, m, d, min), true
				}
			}
		}
	}
	return time.Time{}, false
}

// latest is the last due time in (after, now]; both are at most a few days
// apart (Latest's lookback), so it walks back day by day.
func (c *cron) latest(after, now time.Time) (time.Time, bool) {
	lowDay := after.Truncate(24 * time.Hour)
	for day := now.Truncate(24 * time.Hour); !day.Before(lowDay); day = day.AddDate(0, 0, -1) {
		y, m, d := day.Date()
		if !c.dayMatch(y, m, d) {
			continue
		}
		to := 24*60 - 1
		if day.Equal(now.Truncate(24 * time.Hour)) {
			to = now.Hour()*60 + now.Minute()
		}
		if min, ok := c.minuteOfDay(0, to, false); ok {
			if t := at(y, m, d, min); t.After(after) {
				return t, true
			}
			return time.Time{}, false
		}
	}
	return time.Time{}, false
}
