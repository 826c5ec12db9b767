package p4gen

// The test programs and golden files, for the tests of package p4gen_test
// (the P4Info's, in package p4info, which imports p4gen).
var (
	TestPrograms = testPrograms
	Golden       = golden
)
