/* Repository context read by the shim (origin URL, branch); the bridge trusts none of it. */
#ifndef SHIMBRIDGE_CONTEXT_H
#define SHIMBRIDGE_CONTEXT_H

struct context {
	char	*remote_url;	/* url of remote "origin", or NULL */
	char	*branch;	/* current branch name, or NULL (detached, no repo) */
};

void	context_read_repo(const char *cwd, struct context *);
void	context_free(struct context *);

#endif
