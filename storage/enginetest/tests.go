package enginetest

import "testing"

// tests are the suite, in the order Run runs them.
var tests = []struct {
	name string
	fn   func(*testing.T, Engine)
}{
	{"Alerts", TestAlerts},
	{"UsersAndAudit", TestUsersAndAudit},
	{"FirstKeyDeliveries", TestFirstKeyDeliveries},
	{"Record", TestRecord},
	{"Record_Expired", TestRecord_Expired},
	{"ReleaseKey", TestReleaseKey},
	{"Record_Concurrent", TestRecord_Concurrent},
	{"Sweep", TestSweep},
	{"SweepKeepsFailedClaims", TestSweepKeepsFailedClaims},
	{"Users", TestUsers},
	{"SettingOrInit", TestSettingOrInit},
	{"Tokens", TestTokens},
	{"Record_ExpiredButOwed", TestRecord_ExpiredButOwed},
	{"RejectionCounts", TestRejectionCounts},
	{"ReleaseKeys", TestReleaseKeys},
	{"ReleaseEach_Refusals", TestReleaseEach_Refusals},
	{"Sessions", TestSessions},
	{"DeliveryStats", TestDeliveryStats},
	{"RollupStats_Concurrent", TestRollupStats_Concurrent},
	{"DeliveryStats_NotRolledUp", TestDeliveryStats_NotRolledUp},
	{"DeliveryStats_UnknownNamesTogether", TestDeliveryStats_UnknownNamesTogether},
	{"LoginThrottle", TestLoginThrottle},
	{"LoginAttemptConcurrent", TestLoginAttemptConcurrent},
}
