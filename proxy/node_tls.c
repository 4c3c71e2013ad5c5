/*
 * node_tls.c: a node's tunnel credentials over its life.  At start it logs
 * what its certificate says (subject, expiry) and publishes the expiry as a
 * gauge; twice a day it warns once the expiry is less than STATS_CERT_WARN_DAYS
 * away, or past; on a reload (SIGHUP) it re-reads certificate, key and CA,
 * from the same files (renewed in place) or from changed paths, and hands
 * them to the role's tunnel endpoints for the connections they make or
 * accept from then on.  Connections up keep what they were made with, so a
 * reload drops no stream.  Files that do not load are logged and the
 * running credentials kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "log.h"
#include "node.h"
#include "proto.h"
#include "stats.h"

#define CHECK_S (12 * 3600) /* between two looks at the expiry */

/* "2027-12-06 20:08 UTC" for Unix time t. */
static void day_str(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (!gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M UTC", &tm))
		snprintf(buf, len, "(unreadable)");
}

/* What certificate file cert (subject subj, expiring at not_after) is
 * worth saying, into buf: 0 valid for STATS_CERT_WARN_DAYS more, 1 expiring
 * sooner, 2 expired or unreadable. */
static int expiry_text(int64_t not_after, const char *cert, const char *subj, char *buf, size_t len)
{
	char when[40];
	if (!not_after) {
		snprintf(buf, len, "tls_cert %s: its expiry is unreadable", cert);
		return 2;
	}
	day_str(not_after, when, sizeof when);
	double days = (double)(not_after - (int64_t)time(NULL)) / 86400;
	if (days <= 0) {
		snprintf(buf, len, "tls_cert %s (%s) EXPIRED on %s: new tunnel connections fail; renew it, then"
			 " reload (SIGHUP)", cert, subj, when);
		return 2;
	}
	if (days < STATS_CERT_WARN_DAYS) {
		snprintf(buf, len, "tls_cert %s (%s) expires on %s, in %.0f days: renew it, then reload (SIGHUP)",
			 cert, subj, when, days);
		return 1;
	}
	snprintf(buf, len, "tls_cert %s (%s) valid until %s (%.0f days)", cert, subj, when, days);
	return 0;
}

/* Warn (or worse) if the certificate in use is near or past its expiry;
 * with verbose, also say all is well. */
static void look(const struct px_node *n, int verbose)
{
	char text[1024];
	int level = expiry_text(n->tls.not_after, n->tls.cert, n->tls.subj, text, sizeof text);
	if (level == 2)
		log_error("TLS: %s", text);
	else if (level == 1)
		log_warn("TLS: %s", text);
	else if (verbose)
		log_info("TLS: %s", text);
}

int px_node_tls_expiry(const struct conf *c, char *buf, size_t len)
{
	tun_config cfg = px_daemon_tls_files(c);
	char subj[160];
	tun_tls *t = tun_tls_load(&cfg, 1, buf, len);
	if (!t)
		return -1;
	int64_t at = tun_tls_not_after(t, subj, sizeof subj);
	tun_tls_unref(t);
	return expiry_text(at, conf_tls_cert(c), subj, buf, len);
}

/* Twice a day: look at the expiry (arg: the node). */
static void check_cb(evutil_socket_t fd, short what, void *arg)
{
	look(arg, 0);
}

/* Take credentials tls as the ones in use: their figures, from file cert. */
static int note(struct px_node *n, const tun_tls *tls, const char *cert)
{
	struct px_node_tls *t = &n->tls;
	char *c = strdup(cert ? cert : "(not set)");
	if (!c)
		return -1;
	free(t->cert);
	t->cert = c;
	t->not_after = tun_tls_not_after(tls, t->subj, sizeof t->subj);
	stats_set(px_daemon_stats(n->d), STATS_TLS_NOT_AFTER, t->not_after > 0 ? (uint64_t)t->not_after : 0);
	return 0;
}

/* c's credentials for n's side (those the daemon loaded with c, if it
 * has them); NULL after logging why (with prefix). */
static tun_tls *load(struct px_node *n, const struct conf *c, const char *prefix)
{
	tun_tls *have = px_daemon_take_tls(n->d);
	if (have)
		return have;
	tun_config cfg = px_daemon_tls_files(c);
	char err[512];
	tun_tls *t = tun_tls_load(&cfg, n->tcfg.role == PROTO_ROLE_EDGE, err, sizeof err);
	if (!t)
		log_error("%s%s", prefix, err);
	return t;
}

int px_node_tls_start(struct px_node *n, const struct conf *c)
{
	tun_tls *t = load(n, c, "TLS: ");
	if (!t || note(n, t, conf_tls_cert(c))) {
		tun_tls_unref(t);
		return -1;
	}
	tun_tls_unref(t); /* the endpoints load their own */
	look(n, 1);
	if (!(n->tls.check = event_new(n->env.base, -1, EV_PERSIST, check_cb, n)))
		return -1;
	struct timeval tv = { CHECK_S, 0 };
	event_add(n->tls.check, &tv);
	return 0;
}

void px_node_tls_reload(struct px_node *n, const struct conf *c)
{
	tun_tls *t = load(n, c, "reload: TLS: ");
	if (!t) {
		log_error("reload: TLS: the tunnel keeps the certificate, key and CA it had");
		return;
	}
	if (note(n, t, conf_tls_cert(c))) {
		log_error("reload: TLS: out of memory; the tunnel keeps the credentials it had");
		tun_tls_unref(t);
		return;
	}
	char when[40];
	day_str(n->tls.not_after, when, sizeof when);
	/* not "reload: ...": that begins the lines of a reload that failed */
	log_info("TLS: certificate, key and CA re-read (%s, valid until %s); tunnel connections made from"
		 " now on use them, those up keep theirs", n->tls.subj, when);
	look(n, 0);
	if (n->retls)
		n->retls(n->role, t); /* passes our reference */
	else
		tun_tls_unref(t);
}

void px_node_tls_stop(struct px_node *n)
{
	if (n->tls.check)
		event_free(n->tls.check);
	n->tls.check = NULL;
	free(n->tls.cert);
	n->tls.cert = NULL;
}
