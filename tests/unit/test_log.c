/* Unit tests: daemon log lines, with sd-daemon priorities only when stderr is the journal. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static char path[] = "/tmp/test_log.XXXXXX";
static int saved_stderr = -1;

/* Point stderr at a fresh temporary file; return its dev:ino as JOURNAL_STREAM would. */
static void
stderr_to_file(char *js, size_t jslen)
{
	struct stat st;
	int fd;

	strcpy(path, "/tmp/test_log.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);
	assert_int_equal(fstat(STDERR_FILENO, &st), 0);
	snprintf(js, jslen, "%llu:%llu", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino);
}

/* What was written to the file; stderr is the terminal again (cmocka reports there). */
static char *
contents(void)
{
	static char buf[1024];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof buf - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	close(fd);
	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	unlink(path);
	return buf;
}

/* Write one line of each level. */
static void
write_lines(void)
{
	log_debug("d %d", 1);
	log_info("i %s", "two");
	log_warnx("w");
}

static void
test_journal_prefixes(void **state)
{
	char js[64];

	(void)state;
	stderr_to_file(js, sizeof js);
	setenv("JOURNAL_STREAM", js, 1);
	log_init(1);
	write_lines();
	assert_string_equal(contents(), "<7>debug: d 1\n<6>i two\n<4>warning: w\n");
}

static void
test_not_the_journal(void **state)
{
	char js[64];

	(void)state;
	stderr_to_file(js, sizeof js);
	setenv("JOURNAL_STREAM", "1:2", 1);	/* another stream */
	log_init(0);
	write_lines();
	assert_string_equal(contents(), "shimbridged: i two\nshimbridged: warning: w\n");
}

static void
test_malformed_journal_stream(void **state)
{
	char js[64], bad[80];

	(void)state;
	stderr_to_file(js, sizeof js);
	snprintf(bad, sizeof bad, "%sx", js);	/* trailing garbage */
	setenv("JOURNAL_STREAM", bad, 1);
	log_init(0);
	log_info("x");
	assert_string_equal(contents(), "shimbridged: x\n");
	stderr_to_file(js, sizeof js);
	unsetenv("JOURNAL_STREAM");
	log_init(0);
	log_info("y");
	assert_string_equal(contents(), "shimbridged: y\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_journal_prefixes),
		cmocka_unit_test(test_not_the_journal),
		cmocka_unit_test(test_malformed_journal_stream),
	};
	saved_stderr = dup(STDERR_FILENO);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
