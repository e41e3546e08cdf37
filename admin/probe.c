/*
 * One authenticated HTTPS (or configured plain HTTP) GET for shimbridge check,
 * through libcurl: certificate and host name verified, short timeouts, no
 * redirects, no proxy from the environment, the body discarded. The caller's
 * Authorization header is the only credential sent; it is never printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <sodium.h>

#include "admin.h"
#include "util.h"
#include "wipe.h"

/* libcurl's header callback: one header line. */
static size_t
probe_header(char *buf, size_t size, size_t n, void *arg)
{
	probehdr_line(arg, buf, size * n);
	return size * n;
}

/* libcurl's body callback: keep the start, discard the rest. */
static size_t
probe_body(char *buf, size_t size, size_t n, void *arg)
{
	probehdr_body(arg, buf, size * n);
	return size * n;
}

/* GET url with one Authorization header; fills *r (probe_result_free). */
int
probe_get(const char *url, const char *authorization, const char *ca_file, long timeout,
    struct probe_result *r)
{
	static int inited;
	struct curl_slist *hdrs = NULL, *h;
	char errbuf[CURL_ERROR_SIZE] = "";
	CURLcode cc;
	CURL *curl;
	long code = 0;
	int rc = -1;

	memset(r, 0, sizeof *r);
	if (!inited) {
		/*
		 * libcurl's allocator: the system's, with every block wiped before it is
		 * freed, so the copies libcurl makes of the Authorization header (the
		 * header list, the request it builds and sends) do not stay behind.
		 */
		if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, malloc, wipe_free, wipe_realloc,
		    strdup, calloc) != CURLE_OK) {
			r->error = xstrdup("libcurl failed to initialise");
			return -1;
		}
		inited = 1;
	}
	if ((curl = curl_easy_init()) == NULL) {
		r->error = xstrdup("libcurl failed to initialise");
		return -1;
	}
	hdrs = curl_slist_append(NULL, authorization);
	h = curl_slist_append(hdrs, "Accept: application/vnd.github+json");
	if (hdrs == NULL || h == NULL) {
		r->error = xstrdup("out of memory");
		goto out;
	}
	hdrs = h;
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "shimbridge-check/" SHIMBRIDGE_VERSION);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https,http");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(curl, CURLOPT_PROXY, "");	/* never a proxy from the environment */
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, timeout < 5 ? timeout : 5L);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
	if (ca_file != NULL)
		curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, probe_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, probe_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	if ((cc = curl_easy_perform(curl)) != CURLE_OK) {
		xasprintf(&r->error, "%s", errbuf[0] != '\0' ? errbuf : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
	r->status = (int)code;
	rc = 0;
out:
	/* Our copy of the credential goes; libcurl's own are wiped as it frees them. */
	for (h = hdrs; h != NULL; h = h->next)
		sodium_memzero(h->data, strlen(h->data));
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(curl);
	return rc;
}

/* Free what probe_get filled in. */
void
probe_result_free(struct probe_result *r)
{
	free(r->scopes);
	free(r->expires);
	free(r->error);
	free(r->body);
	memset(r, 0, sizeof *r);
}
