package connection

// ClassOf exposes classOf to the tests.
var ClassOf = classOf
