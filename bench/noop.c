/*
 * noop: the least a process can cost. bench/run execs it (static, musl, built like
 * the shim) to measure the floor of any design in which a program in the sandbox
 * hands a command to a process that runs the tool: one exec of a small static
 * binary plus the tool's own exec (docs/PERFORMANCE.md, "floor").
 */
int
main(void)
{
	return 0;
}
