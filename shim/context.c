/*
 * Repository context for tools like gh: the shim reads, as the sandbox user and
 * without running anything, the origin remote URL and the current branch of the
 * repository around its cwd. The bridge validates both; nothing here is trusted.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context.h"
#include "util.h"

#define CONTEXT_FILE_MAX	(64 * 1024)
#define CONTEXT_MAX_DEPTH	64

/* Read a small file whole; NULL if missing or too large. */
static char *
context_read(const char *path)
{
	char *buf;
	ssize_t n;
	size_t off = 0;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return NULL;
	buf = xmalloc(CONTEXT_FILE_MAX + 1);
	while (off < CONTEXT_FILE_MAX && (n = read(fd, buf + off, CONTEXT_FILE_MAX - off)) > 0)
		off += (size_t)n;
	close(fd);
	if (off == CONTEXT_FILE_MAX) {
		free(buf);
		return NULL;
	}
	buf[off] = '\0';
	return buf;
}

/* Find the git directory for dir: a .git directory, or a "gitdir:" file. */
static char *
context_gitdir(const char *start)
{
	char dir[PATH_MAX], path[PATH_MAX + 8], *slash, *text, *nl;
	int depth;

	if (strcpy_checked(dir, sizeof dir, start) != 0)
		return NULL;
	for (depth = 0; depth < CONTEXT_MAX_DEPTH; depth++) {
		snprintf(path, sizeof path, "%s/.git", strcmp(dir, "/") == 0 ? "" : dir);
		if (access(path, F_OK) == 0) {
			char head[PATH_MAX + 16];

			snprintf(head, sizeof head, "%s/HEAD", path);
			if (access(head, F_OK) == 0)
				return xstrdup(path);
			/* A worktree or submodule: ".git" is a file naming the real directory. */
			if ((text = context_read(path)) == NULL)
				return NULL;
			if (strncmp(text, "gitdir: ", 8) != 0) {
				free(text);
				return NULL;
			}
			if ((nl = strchr(text, '\n')) != NULL)
				*nl = '\0';
			if (text[8] != '/') {
				char *abs;

				xasprintf(&abs, "%s/%s", dir, text + 8);
				free(text);
				return abs;
			}
			{
				char *r = xstrdup(text + 8);

				free(text);
				return r;
			}
		}
		if (strcmp(dir, "/") == 0)
			return NULL;
		if ((slash = strrchr(dir, '/')) == NULL)
			return NULL;
		if (slash == dir)
			dir[1] = '\0';
		else
			*slash = '\0';
	}
	return NULL;
}

/* Trim spaces and tabs at both ends, in place. */
static char *
context_trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* The url of [remote "origin"] in a git config text (first one wins). */
static char *
context_origin(char *config)
{
	char *line, *save = NULL;
	int in_origin = 0;

	for (line = strtok_r(config, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char *l = context_trim(line), *eq;

		if (*l == '[') {
			in_origin = strncmp(l, "[remote \"origin\"]", 17) == 0;
			continue;
		}
		if (!in_origin || strncmp(l, "url", 3) != 0)
			continue;
		eq = context_trim(l + 3);
		if (*eq != '=')
			continue;
		eq = context_trim(eq + 1);
		if (*eq == '\0' || strlen(eq) > 1024)
			return NULL;
		return xstrdup(eq);
	}
	return NULL;
}

/* Fill ctx from the repository around cwd; fields stay NULL when unknown. */
void
context_read_repo(const char *cwd, struct context *ctx)
{
	char *gitdir, *path, *text;

	memset(ctx, 0, sizeof *ctx);
	if ((gitdir = context_gitdir(cwd)) == NULL)
		return;
	xasprintf(&path, "%s/HEAD", gitdir);
	if ((text = context_read(path)) != NULL) {
		char *nl = strchr(text, '\n');

		if (nl != NULL)
			*nl = '\0';
		if (strncmp(text, "ref: refs/heads/", 16) == 0 && strlen(text + 16) <= 255)
			ctx->branch = xstrdup(text + 16);
		free(text);
	}
	free(path);
	/* In a worktree the config lives in the common directory. */
	xasprintf(&path, "%s/commondir", gitdir);
	if ((text = context_read(path)) != NULL) {
		char *nl = strchr(text, '\n'), *common;

		if (nl != NULL)
			*nl = '\0';
		if (text[0] == '/')
			common = xstrdup(text);
		else
			xasprintf(&common, "%s/%s", gitdir, text);
		free(text);
		free(gitdir);
		gitdir = common;
	}
	free(path);
	xasprintf(&path, "%s/config", gitdir);
	if ((text = context_read(path)) != NULL) {
		ctx->remote_url = context_origin(text);
		free(text);
	}
	free(path);
	free(gitdir);
}

/* Release the strings. */
void
context_free(struct context *ctx)
{
	free(ctx->remote_url);
	free(ctx->branch);
	memset(ctx, 0, sizeof *ctx);
}
