/* SPDX-License-Identifier: MIT */
/*
 * check_security.c -- the pool's directory and files against other local
 * users: symbolic links planted where the library creates or opens its
 * files, directories others can write, and the modes and group of what
 * the library creates.  marukv(7) and mkv_pool_open() promise that an
 * unsafe directory or file is refused with MKV_E_PERM and that nothing is
 * written through it; mkv_opts_set_group() promises modes 0700/0600
 * without a group and 0750/0660 with one, whatever the umask.
 *
 * The attacks need a second user: as root, main() creates two users and a
 * group (useradd, groupadd) and removes them at the end.  An "outsider" is
 * in no group of ours; an "insider" is in the pool's group.  Tests that
 * need root or those users say so on stderr and return; the others run
 * as any user.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"

#ifndef MKV_TOOLS_DIR
#define MKV_TOOLS_DIR "utils"
#endif

#define NODE "a"
#define TARGET_SIZE 8192

/* The users and group main() made; names empty when there are none. */
static char out_name[32], in_name[32], grp_name[32];
static gid_t grp_gid;

static char *shm;     /* tu_dir/shm: world-writable and sticky, like /dev/shm */
static char *target;  /* tu_dir/target: root's file that attacks aim at */

static int
skip_unless_root(const char *test)
{
	if (geteuid() == 0)
		return 0;
	fprintf(stderr, "%s: skipped, needs root\n", test);
	return 1;
}

static int
skip_unless_users(const char *test)
{
	if (skip_unless_root(test))
		return 1;
	if (out_name[0] && in_name[0])
		return 0;
	fprintf(stderr, "%s: skipped, could not create test users\n", test);
	return 1;
}

#define SKIP_UNLESS_ROOT() do { if (skip_unless_root(__func__)) return; } while (0)
#define SKIP_UNLESS_USERS() do { if (skip_unless_users(__func__)) return; } while (0)

static char *
path_in(const char *dir, const char *name)
{
	char *p;

	ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

/* A file of TARGET_SIZE pattern bytes, mode 0644. */
static void
make_target(const char *path)
{
	static char buf[TARGET_SIZE];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	tu_fill(buf, sizeof(buf), "target", 6);
	ck_assert_int_eq(write(fd, buf, sizeof(buf)), sizeof(buf));
	ck_assert_int_eq(fchmod(fd, 0644), 0);
	close(fd);
}

/* NULL if the file still holds make_target()'s bytes, else what changed. */
static const char *
target_changed(const char *path)
{
	static char buf[TARGET_SIZE + 1];
	struct stat st;
	ssize_t n;
	int fd;

	if (lstat(path, &st) < 0)
		return "it is gone";
	if (!S_ISREG(st.st_mode))
		return "it is no longer a regular file";
	if (st.st_size != TARGET_SIZE)
		return "its size changed";
	if ((fd = open(path, O_RDONLY)) < 0)
		return "it cannot be opened";
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n != TARGET_SIZE || tu_verify(buf, TARGET_SIZE, "target", 6) != -1)
		return "its bytes changed";
	return NULL;
}

/* Byte-for-byte copy of a file; the copy is mode 0600. */
static void
copy_file(const char *from, const char *to)
{
	static char buf[1 << 16];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t n;

	ck_assert_msg(in >= 0 && out >= 0, "copy %s to %s: %s", from, to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)n), n);
	ck_assert_int_eq(n, 0);
	close(in);
	close(out);
}

/* 1 if the two files have the same bytes. */
static int
same_bytes(const char *a, const char *b)
{
	static char x[1 << 16], y[1 << 16];
	int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY), same = fa >= 0 && fb >= 0;
	ssize_t n, m;

	while (same) {
		n = read(fa, x, sizeof(x));
		m = read(fb, y, sizeof(y));
		if (n != m || n < 0 || memcmp(x, y, (size_t)n) != 0)
			same = 0;
		if (n <= 0)
			break;
	}
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return same;
}

/* The memory model of the pools open_pool() creates (the lock directory tests: non-coherent). */
static enum mkv_coherence coherence = MKV_COHERENT;

/* Open with the suite's small geometry and node "a"; a group when gid != -1. */
static int
open_pool(const char *path, unsigned flags, gid_t gid, const char *node, struct mkv_pool **pool)
{
	struct mkv_opts *opts = NULL;
	int rc;

	*pool = NULL;
	if ((rc = mkv_opts_new(&opts)) < 0)
		return rc;
	if ((rc = mkv_opts_set_page_size(opts, TU_PAGE_SIZE)) < 0 ||
	    (rc = mkv_opts_set_data_size(opts, 1ULL << 20)) < 0 ||
	    (rc = mkv_opts_set_max_clients(opts, 4)) < 0 ||
	    (rc = mkv_opts_set_node(opts, node ? node : NODE)) < 0 ||
	    (rc = mkv_opts_set_coherence(opts, coherence)) < 0 ||
	    (coherence == MKV_NONCOHERENT && (rc = mkv_opts_set_max_nodes(opts, 2)) < 0) ||
	    (gid != (gid_t)-1 && (rc = mkv_opts_set_group(opts, gid)) < 0)) {
		mkv_opts_delete(&opts);
		return rc;
	}
	rc = mkv_pool_open(path, flags, opts, pool);
	mkv_opts_delete(&opts);
	return rc;
}

/* ---- other users ---- */

/*
 * Become user @p name (its groups too), in a child; 0 or -1.  Changing
 * credentials clears the parent-death signal tu_fork() set: set it again.
 */
static int
become(const char *name)
{
	struct passwd *pw = getpwnam(name);
	pid_t parent = getppid();

	if (pw == NULL || initgroups(name, pw->pw_gid) < 0 ||
	    setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
	    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		return -1;
	return 0;
}

static uid_t
uid_of(const char *name)
{
	struct passwd *pw = getpwnam(name);

	ck_assert_msg(pw != NULL, "no user %s", name);
	return pw->pw_uid;
}

/*
 * Run fn(arg) as user @p name in a child, with a message buffer shared
 * back; returns its exit status (asserting it ended within 30 s).
 */
struct as_user {
	char msg[512];
};

static int
as_user(const char *name, int (*fn)(void *, struct as_user *), void *arg, struct as_user *out)
{
	struct as_user *sh = tu_shared(sizeof(*sh));
	pid_t pid = tu_fork();
	int rc;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (become(name) < 0)
			_exit(98);
		_exit(fn(arg, sh));
	}
	rc = tu_reap(pid, 30);
	ck_assert_msg(rc != -2, "the child running as %s did not finish in 30 s", name);
	ck_assert_msg(rc != 98, "cannot become user %s", name);
	if (out)
		*out = *sh;
	tu_shared_free(sh, sizeof(*sh));
	return rc;
}

/* A directory owned by @p name, mode 0700 (a home of its own). */
static char *
home_of(const char *name)
{
	char *dir = path_in(tu_dir, name);

	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(chown(dir, uid_of(name), (gid_t)-1), 0);
	return dir;
}

static int
run(char *const argv[])
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0) {
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Retried: another process may hold the lock of /etc/passwd for a moment. */
static int
run_retry(char *const argv[])
{
	int rc = -1;

	for (int i = 0; i < 50 && rc != 0; i++) {
		rc = run(argv);
		if (rc == 127)
			break;
		if (rc != 0)
			tu_sleep_ms(100);
	}
	return rc;
}

static void
users_remove(void)
{
	if (out_name[0])
		run_retry((char *[]){ "userdel", "-f", out_name, NULL });
	if (in_name[0])
		run_retry((char *[]){ "userdel", "-f", in_name, NULL });
	if (grp_name[0])
		run_retry((char *[]){ "groupdel", grp_name, NULL });
	out_name[0] = in_name[0] = grp_name[0] = '\0';
}

static void
users_make(void)
{
	unsigned id = (unsigned)getpid() % 100000;
	struct group *gr;

	snprintf(grp_name, sizeof(grp_name), "mkvsecg%u", id);
	if (run_retry((char *[]){ "groupadd", grp_name, NULL }) != 0 ||
	    !(gr = getgrnam(grp_name))) {
		grp_name[0] = '\0';
		return;
	}
	grp_gid = gr->gr_gid;
	snprintf(out_name, sizeof(out_name), "mkvseco%u", id);
	if (run_retry((char *[]){ "useradd", "-M", "-U", "-s", "/usr/sbin/nologin", out_name,
			NULL }) != 0)
		out_name[0] = '\0';
	snprintf(in_name, sizeof(in_name), "mkvseci%u", id);
	if (run_retry((char *[]){ "useradd", "-M", "-U", "-s", "/usr/sbin/nologin", "-G",
			grp_name, in_name, NULL }) != 0)
		in_name[0] = '\0';
	if (!out_name[0] || !in_name[0])
		users_remove();
}

/*
 * Users and groups an earlier run left (it was killed before removing
 * them): named after a process that is gone.
 */
static void
users_remove_stale(void)
{
	char names[64][32];
	unsigned n = 0, pid;
	struct passwd *pw;
	struct group *gr;
	char kind;

	setpwent();
	while ((pw = getpwent()) != NULL && n < 64)
		if (sscanf(pw->pw_name, "mkvsec%c%u", &kind, &pid) == 2 && (kind == 'o' || kind == 'i') &&
		    kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			snprintf(names[n++], sizeof(names[0]), "%s", pw->pw_name);
	endpwent();
	for (unsigned i = 0; i < n; i++)
		run_retry((char *[]){ "userdel", "-f", names[i], NULL });
	n = 0;
	setgrent();
	while ((gr = getgrent()) != NULL && n < 64)
		if (sscanf(gr->gr_name, "mkvsec%c%u", &kind, &pid) == 2 && kind == 'g' &&
		    kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			snprintf(names[n++], sizeof(names[0]), "%s", gr->gr_name);
	endgrent();
	for (unsigned i = 0; i < n; i++)
		run_retry((char *[]){ "groupdel", names[i], NULL });
}

/* ---- fixture ---- */

static void
sec_setup(void)
{
	const char *root = getenv("MKV_TEST_TMPROOT");

	tu_setup();
	umask(022);
	/* other users must reach the directories the attacks use */
	if (root)
		ck_assert_int_eq(chmod(root, 0711), 0);
	ck_assert_int_eq(chmod(tu_dir, 0711), 0);
	shm = path_in(tu_dir, "shm");
	ck_assert_int_eq(mkdir(shm, 0700), 0);
	ck_assert_int_eq(chmod(shm, 01777), 0);
	target = path_in(tu_dir, "target");
	make_target(target);
	coherence = MKV_COHERENT;
	ck_assert_int_eq(setenv("MARUKV_LOCK_DIR", shm, 1), 0);
}

static void
sec_teardown(void)
{
	free(shm);
	free(target);
	shm = target = NULL;
	tu_teardown();
}

/* ---- symbolic links planted by another user ---- */

struct plant {
	const char *dir;   /* the pool directory the attacker makes */
	const char *name;  /* the file it makes a link */
	const char *to;    /* where the link points */
};

static int
plant_link(void *arg, struct as_user *out)
{
	struct plant *pl = arg;
	char *link;

	if (mkdir(pl->dir, 0755) < 0 || chmod(pl->dir, 0755) < 0) {
		snprintf(out->msg, sizeof(out->msg), "mkdir %s: %s", pl->dir, strerror(errno));
		return 1;
	}
	if (asprintf(&link, "%s/%s", pl->dir, pl->name) < 0 || symlink(pl->to, link) < 0) {
		snprintf(out->msg, sizeof(out->msg), "symlink: %s", strerror(errno));
		return 2;
	}
	free(link);
	return 0;
}

/*
 * An outsider makes the pool directory at a predictable name in the
 * shared directory, with @p name a link to root's file; root then creates
 * the pool there.  Refused with MKV_E_PERM, the file untouched.
 */
static void
planted_link_is_not_followed(const char *name)
{
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	struct plant pl;
	struct as_user res;
	char *dir = path_in(shm, "marukv");
	const char *changed;
	int rc;

	pl = (struct plant){ dir, name, target };
	rc = as_user(out_name, plant_link, &pl, &res);
	ck_assert_msg(rc == 0, "planting the link: %d: %s", rc, res.msg);
	rc = open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool);
	changed = target_changed(target);
	if (rc == 0)
		mkv_pool_close(&pool);
	ck_assert_msg(rc == MKV_E_PERM && changed == NULL,
			"root creating a pool in a directory another user made, with %s a link "
			"to root's file: mkv_pool_open = %d (%s): \"%s\"; expected MKV_E_PERM; "
			"the target file: %s", name, rc, mkv_strerror(rc), mkv_errormsg(),
			changed ? changed : "unchanged");
	ck_assert_msg(mkv_errormsg()[0] != '\0', "no message");
	ck_assert_ptr_null(pool);
	free(dir);
}

START_TEST(test_symlinked_super_new_is_not_followed)
{
	SKIP_UNLESS_USERS();
	planted_link_is_not_followed("super.new");
}
END_TEST

START_TEST(test_symlinked_data_is_not_followed)
{
	SKIP_UNLESS_USERS();
	planted_link_is_not_followed("data");
}
END_TEST

START_TEST(test_symlinked_registry_is_not_followed)
{
	SKIP_UNLESS_USERS();
	planted_link_is_not_followed("registry.mdb");
}
END_TEST

START_TEST(test_symlinked_registry_lock_is_not_followed)
{
	SKIP_UNLESS_USERS();
	planted_link_is_not_followed("registry.mdb-lock");
}
END_TEST

START_TEST(test_symlinked_node_lock_is_not_followed)
{
	SKIP_UNLESS_USERS();
	planted_link_is_not_followed("node-" NODE ".lock");
}
END_TEST

START_TEST(test_symlinked_super_is_not_followed)
{
	SKIP_UNLESS_USERS();
	planted_link_is_not_followed("super");
}
END_TEST

/*
 * A directory of ours, *victim, and the outsider's home, *home (0755): the
 * path of a pool in that home, which the outsider controls.
 */
static char *
outsider_pool_path(char **victim, char **home)
{
	*victim = path_in(tu_dir, "victim");
	ck_assert_int_eq(mkdir(*victim, 0700), 0);
	*home = home_of(out_name);
	ck_assert_int_eq(chmod(*home, 0755), 0);
	return path_in(*home, "pool");
}

/* The pool path itself a link (in the outsider's own directory) to root's directory. */
START_TEST(test_symlinked_pool_path_of_another_user_is_not_followed)
{
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	char *home, *victim, *link;
	int rc;

	SKIP_UNLESS_USERS();
	link = outsider_pool_path(&victim, &home);
	{
		pid_t pid = tu_fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			_exit(become(out_name) < 0 || symlink(victim, link) < 0);
		ck_assert_int_eq(tu_wait_for(pid, 10), 0);
	}
	rc = open_pool(link, MKV_CREATE, (gid_t)-1, NULL, &pool);
	if (rc == 0)
		mkv_pool_close(&pool);
	ck_assert_msg(rc == MKV_E_PERM, "a pool path that is another user's link to root's "
			"directory: mkv_pool_open = %d (%s): \"%s\"; expected MKV_E_PERM", rc,
			mkv_strerror(rc), mkv_errormsg());
	ck_assert_msg(rmdir(victim) == 0, "the pool was created in the link's target");
	free(link);
	free(home);
	free(victim);
}
END_TEST

/*
 * Another user keeps swapping what is at the pool's path in its own
 * directory: a link to a directory of ours, nothing, a directory of its
 * own, nothing.  400 opens with MKV_CREATE meanwhile: each succeeds (a
 * pool of ours, which the swapper then renames away) or is refused with
 * MKV_E_PERM; never MKV_E_NOENT, which is for opens without create (17
 * of 400 were, when a directory that vanished before its open was taken
 * for no pool), and nothing is made through the link.
 */
START_TEST(test_create_while_another_user_swaps_the_path)
{
	char *home, *victim, *path, *away;
	int *stop = tu_shared(sizeof(int)), codes[2] = { 0 };
	pid_t pid;

	SKIP_UNLESS_USERS();
	path = outsider_pool_path(&victim, &home);
	away = path_in(home, "away");
	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (become(out_name) < 0)
			_exit(98);
		for (unsigned n = 0; !__atomic_load_n(stop, __ATOMIC_ACQUIRE); n++) {
			char aside[4096];

			(void)!symlink(victim, path);
			(void)!unlink(path);
			(void)!mkdir(path, 0700);
			(void)!rmdir(path);
			/* a pool the opener made (or is making): out of the way, the race goes on */
			snprintf(aside, sizeof(aside), "%s.%u", away, n);
			(void)!rename(path, aside);
		}
		_exit(0);
	}
	for (int i = 0; i < 400; i++) {
		struct mkv_pool *pool = NULL;
		int rc = open_pool(path, MKV_CREATE, (gid_t)-1, NULL, &pool);

		mkv_pool_close(&pool);
		ck_assert_msg(rc == 0 || rc == MKV_E_PERM, "open %d of 400 with MKV_CREATE while "
				"another user swaps the path: %d (%s): \"%s\"", i, rc, mkv_strerror(rc),
				mkv_errormsg());
		codes[rc == 0 ? 0 : 1]++;
	}
	__atomic_store_n(stop, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(tu_reap(pid, 10), 0);
	ck_assert_msg(rmdir(victim) == 0, "something was made through the link");
	fprintf(stderr, "# racing creates: %d opened, %d refused\n", codes[0], codes[1]);
	tu_shared_free(stop, sizeof(int));
	free(away);
	free(path);
	free(home);
	free(victim);
}
END_TEST

/* ---- unsafe directories and files of the caller's own ---- */

START_TEST(test_symlinked_pool_path_is_refused)
{
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	char *victim = path_in(tu_dir, "victim"), *link = path_in(tu_dir, "link");

	ck_assert_int_eq(mkdir(victim, 0700), 0);
	ck_assert_int_eq(symlink(victim, link), 0);
	TU_ERR(open_pool(link, MKV_CREATE, (gid_t)-1, NULL, &pool), MKV_E_PERM);
	ck_assert_ptr_null(pool);
	ck_assert_msg(rmdir(victim) == 0, "the pool was created in the link's target");
	/* a pool made at the real path is not opened through the link either */
	TU_OK(open_pool(victim, MKV_CREATE, (gid_t)-1, NULL, &pool));
	mkv_pool_close(&pool);
	TU_ERR(open_pool(link, 0, (gid_t)-1, NULL, &pool), MKV_E_PERM);
	free(link);
	free(victim);
}
END_TEST

START_TEST(test_world_writable_pool_dir_is_refused)
{
	static const mode_t modes[] = { 0777, 01777, 0757 };
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	char name[32], *dir;
	int rc;

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		snprintf(name, sizeof(name), "ww%zu", i);
		dir = path_in(tu_dir, name);
		ck_assert_int_eq(mkdir(dir, 0700), 0);
		ck_assert_int_eq(chmod(dir, modes[i]), 0);
		rc = open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool);
		if (rc == 0)
			mkv_pool_close(&pool);
		ck_assert_msg(rc == MKV_E_PERM, "creating a pool in a directory of mode %04o: "
				"mkv_pool_open = %d (%s): \"%s\"; expected MKV_E_PERM",
				(unsigned)modes[i], rc, mkv_strerror(rc), mkv_errormsg());
		ck_assert_msg(mkv_errormsg()[0] != '\0', "no message");
		ck_assert_msg(rmdir(dir) == 0, "files were created in the directory of mode %04o",
				(unsigned)modes[i]);
		/* an existing pool whose directory became writable by others */
		ck_assert_int_eq(mkdir(dir, 0700), 0);
		TU_OK(open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool));
		mkv_pool_close(&pool);
		ck_assert_int_eq(chmod(dir, modes[i]), 0);
		TU_ERR(open_pool(dir, 0, (gid_t)-1, NULL, &pool), MKV_E_PERM);
		TU_ERR(open_pool(dir, MKV_RDONLY, (gid_t)-1, NULL, &pool), MKV_E_PERM);
		free(dir);
	}
}
END_TEST

/*
 * In a directory of the caller's own, each file the library creates,
 * planted beforehand as a link to a file of the caller's (or a FIFO):
 * creation refuses with MKV_E_PERM and the file is unchanged.  The one
 * exception is super.new, which an interrupted creation leaves behind: it
 * is removed (the link itself, never what it leads to) and made afresh.
 */
START_TEST(test_planted_files_in_own_dir_are_refused)
{
	static const char *const names[] = { "super.new", "data", "registry.mdb",
			"registry.mdb-lock", "super" };
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	const char *changed;
	char name[32], *dir, *link;
	int rc;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(name, sizeof(name), "own%zu", i);
		dir = path_in(tu_dir, name);
		ck_assert_int_eq(mkdir(dir, 0700), 0);
		link = path_in(dir, names[i]);
		ck_assert_int_eq(symlink(target, link), 0);
		rc = open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool);
		changed = target_changed(target);
		if (rc == 0)
			mkv_pool_close(&pool);
		ck_assert_msg((i == 0 ? rc == 0 : rc == MKV_E_PERM) && !changed,
				"creating a pool with %s a link to another file: mkv_pool_open = %d "
				"(%s): \"%s\"; expected %s; the target: %s", names[i], rc,
				mkv_strerror(rc), mkv_errormsg(), i == 0 ? "success" : "MKV_E_PERM",
				changed ? changed : "unchanged");
		free(link);
		free(dir);
	}
	/* not regular files: a FIFO must neither be used nor block the call */
	for (size_t i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "fifo%zu", i);
		dir = path_in(tu_dir, name);
		ck_assert_int_eq(mkdir(dir, 0700), 0);
		link = path_in(dir, names[i]);
		ck_assert_int_eq(mkfifo(link, 0600), 0);
		rc = open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool);
		if (rc == 0)
			mkv_pool_close(&pool);
		ck_assert_msg(i == 0 ? rc == 0 : rc == MKV_E_PERM,
				"creating a pool with %s a FIFO: mkv_pool_open = %d (%s): \"%s\"; "
				"expected %s", names[i], rc, mkv_strerror(rc), mkv_errormsg(),
				i == 0 ? "success" : "MKV_E_PERM");
		free(link);
		free(dir);
	}
}
END_TEST

/*
 * An existing pool, one of whose files was replaced by a link to a copy
 * of itself: refused, the copy unchanged (opening would write client
 * slots, the lock table, ... through the link).
 */
START_TEST(test_symlinked_file_of_existing_pool_is_refused)
{
	static const char *const names[] = { "super", "data", "registry.mdb",
			"registry.mdb-lock" };
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	char *dir = path_in(tu_dir, "pool"), *file, *copy, *keep;
	int rc, same;

	TU_OK(open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool));
	TU_OK(tu_put(pool, "k", 1, 3000));
	mkv_pool_close(&pool);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		file = path_in(dir, names[i]);
		copy = path_in(tu_dir, names[i]);
		keep = path_in(tu_dir, "keep");
		copy_file(file, copy);
		copy_file(file, keep);
		ck_assert_int_eq(unlink(file), 0);
		ck_assert_int_eq(symlink(copy, file), 0);
		rc = open_pool(dir, 0, (gid_t)-1, NULL, &pool);
		if (rc == 0)
			mkv_pool_close(&pool);
		same = same_bytes(copy, keep);
		ck_assert_msg(rc == MKV_E_PERM && same,
				"opening a pool whose %s is a link to a copy of itself: mkv_pool_open = "
				"%d (%s): \"%s\"; expected MKV_E_PERM; the copy %s", names[i], rc,
				mkv_strerror(rc), mkv_errormsg(), same ? "is unchanged" : "was written");
		TU_ERR(open_pool(dir, MKV_RDONLY, (gid_t)-1, NULL, &pool), MKV_E_PERM);
		/* put the file back for the next name */
		ck_assert_int_eq(unlink(file), 0);
		ck_assert_int_eq(rename(keep, file), 0);
		ck_assert_int_eq(unlink(copy), 0);
		free(keep);
		free(copy);
		free(file);
	}
	TU_OK(open_pool(dir, 0, (gid_t)-1, NULL, &pool));
	ck_assert_int_eq(tu_check(pool, "k", 1, 3000), 0);
	mkv_pool_close(&pool);
	free(dir);
}
END_TEST

/* ---- a non-coherent pool's lock directory ---- */

/*
 * A non-coherent pool at tu_dir/pool, a key in it, and its lock directory
 * under the shared directory (malloc'd in *lockdir); with `gone` the
 * directory is removed again, as on a host where the pool was never open.
 */
static char *
lockdir_pool(char **lockdir, int gone)
{
	struct mkv_pool *pool;
	char *dir = path_in(tu_dir, "pool"), *f;

	coherence = MKV_NONCOHERENT;
	TU_OK(open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool));
	TU_OK(tu_put(pool, "k", 1, 3000));
	*lockdir = tu_lockdir(shm, pool);
	mkv_pool_close(&pool);
	if (gone) {
		f = path_in(*lockdir, "registry.mdb-lock");
		ck_assert_int_eq(unlink(f), 0);
		free(f);
		f = path_in(*lockdir, "registry.mdb");
		ck_assert_int_eq(unlink(f), 0);
		free(f);
		ck_assert_int_eq(rmdir(*lockdir), 0);
	}
	return dir;
}

/*
 * Opening the pool (read-write, then read-only) is refused with
 * MKV_E_PERM and a message naming the lock directory, and the registry
 * is unchanged.
 */
static void
lockdir_refused(const char *dir, const char *lockdir, const char *what)
{
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	char *reg = path_in(dir, "registry.mdb"), *keep = path_in(tu_dir, "registry.keep");
	int rc, same;

	copy_file(reg, keep);
	rc = open_pool(dir, 0, (gid_t)-1, NULL, &pool);
	if (rc == 0)
		mkv_pool_close(&pool);
	same = same_bytes(reg, keep);
	ck_assert_msg(rc == MKV_E_PERM && strstr(mkv_errormsg(), lockdir) && same,
			"opening a non-coherent pool whose lock directory %s: mkv_pool_open = %d "
			"(%s): \"%s\"; expected MKV_E_PERM naming %s; registry.mdb %s", what, rc,
			mkv_strerror(rc), mkv_errormsg(), lockdir, same ? "unchanged" : "changed");
	TU_ERR(open_pool(dir, MKV_RDONLY, (gid_t)-1, NULL, &pool), MKV_E_PERM);
	ck_assert_ptr_null(pool);
	ck_assert_msg(same_bytes(reg, keep), "registry.mdb changed by a refused read-only open");
	unlink(keep);
	free(keep);
	free(reg);
}

/* The pool opens and holds its key (the refusals above were the directory's doing). */
static void
lockdir_pool_works(const char *dir)
{
	struct mkv_pool *pool;

	TU_OK(open_pool(dir, 0, (gid_t)-1, NULL, &pool));
	ck_assert_int_eq(tu_check(pool, "k", 1, 3000), 0);
	mkv_pool_close(&pool);
}

struct lockdir_plant {
	const char *lockdir;
	const char *registry;  /* the pool's registry.mdb, for the planted link */
	const char *victim;    /* else: the lock directory is a link to this */
};

/*
 * The outsider makes the lock directory before root opens the pool on
 * this host: a link to root's directory, or a directory of its own that
 * is otherwise as the library makes it (a link to the pool's registry.mdb,
 * an empty lock file it can read).
 */
static int
lockdir_plant(void *arg, struct as_user *out)
{
	struct lockdir_plant *pl = arg;
	char *f;
	int fd;

	if (pl->victim) {
		if (symlink(pl->victim, pl->lockdir) < 0)
			goto fail;
		return 0;
	}
	if (mkdir(pl->lockdir, 0700) < 0 || chmod(pl->lockdir, 0700) < 0)
		goto fail;
	if (asprintf(&f, "%s/registry.mdb", pl->lockdir) < 0 || symlink(pl->registry, f) < 0)
		goto fail;
	free(f);
	if (asprintf(&f, "%s/registry.mdb-lock", pl->lockdir) < 0 ||
	    (fd = open(f, O_RDWR | O_CREAT | O_EXCL, 0600)) < 0 || fchmod(fd, 0666) < 0)
		goto fail;
	close(fd);
	free(f);
	return 0;
fail:
	snprintf(out->msg, sizeof(out->msg), "planting %s: %s", pl->lockdir, strerror(errno));
	return 1;
}

START_TEST(test_lockdir_of_another_user_is_refused)
{
	char *lockdir, *dir, *reg, *victim, *lock;
	struct lockdir_plant pl;
	struct as_user res;
	struct stat st;
	int rc;

	SKIP_UNLESS_USERS();
	dir = lockdir_pool(&lockdir, 1);
	reg = path_in(dir, "registry.mdb");
	victim = path_in(tu_dir, "victim");
	pl = (struct lockdir_plant){ lockdir, reg, NULL };
	rc = as_user(out_name, lockdir_plant, &pl, &res);
	ck_assert_msg(rc == 0, "%s", res.msg);
	lockdir_refused(dir, lockdir, "another user made");
	lock = path_in(lockdir, "registry.mdb-lock");
	ck_assert_msg(stat(lock, &st) == 0 && st.st_size == 0,
			"the other user's lock file was written");
	free(lock);
	ck_assert_int_eq(tu_rmtree(lockdir), 0);

	/* the lock directory a link to a directory of root's */
	ck_assert_int_eq(mkdir(victim, 0700), 0);
	pl = (struct lockdir_plant){ lockdir, reg, victim };
	rc = as_user(out_name, lockdir_plant, &pl, &res);
	ck_assert_msg(rc == 0, "%s", res.msg);
	lockdir_refused(dir, lockdir, "is another user's link to root's directory");
	ck_assert_msg(rmdir(victim) == 0, "files were made in the link's target");
	ck_assert_int_eq(unlink(lockdir), 0);
	lockdir_pool_works(dir);
	free(victim);
	free(reg);
	free(lockdir);
	free(dir);
}
END_TEST

START_TEST(test_planted_link_in_lockdir_is_not_followed)
{
	char *lockdir, *dir = lockdir_pool(&lockdir, 0);
	char *lock = path_in(lockdir, "registry.mdb-lock");
	const char *changed;

	ck_assert_int_eq(unlink(lock), 0);
	ck_assert_int_eq(symlink(target, lock), 0);
	lockdir_refused(dir, lockdir, "holds registry.mdb-lock as a link to another file");
	changed = target_changed(target);
	ck_assert_msg(changed == NULL, "the link's target: %s", changed);
	ck_assert_int_eq(unlink(lock), 0);
	lockdir_pool_works(dir);
	free(lock);
	free(lockdir);
	free(dir);
}
END_TEST

/*
 * The pool's directory is 0700: a lock directory open to anyone else is
 * refused; and one open to a group other than the pool's, in a pool
 * with a group.
 */
START_TEST(test_lockdir_wider_than_pool_dir_is_refused)
{
	static const mode_t modes[] = { 0755, 0770, 01777, 0707, 01700 };
	char *lockdir, *dir = lockdir_pool(&lockdir, 0), what[64];

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		ck_assert_int_eq(chmod(lockdir, modes[i]), 0);
		snprintf(what, sizeof(what), "has mode %04o", (unsigned)modes[i]);
		lockdir_refused(dir, lockdir, what);
	}
	ck_assert_int_eq(chmod(lockdir, 0700), 0);
	lockdir_pool_works(dir);
	free(lockdir);
	free(dir);
}
END_TEST

START_TEST(test_lockdir_of_another_group_is_refused)
{
	struct mkv_pool *pool;
	char *dir, *lockdir;
	struct stat st;

	SKIP_UNLESS_USERS();
	dir = path_in(tu_dir, "gpool");
	coherence = MKV_NONCOHERENT;
	TU_OK(open_pool(dir, MKV_CREATE, grp_gid, NULL, &pool));
	TU_OK(tu_put(pool, "k", 1, 3000));
	lockdir = tu_lockdir(shm, pool);
	mkv_pool_close(&pool);
	ck_assert_msg(stat(lockdir, &st) == 0 && (st.st_mode & 07777) == 0750 &&
			st.st_gid == grp_gid, "the lock directory of a pool with group %u: "
			"mode %04o group %u", (unsigned)grp_gid, (unsigned)(st.st_mode & 07777),
			(unsigned)st.st_gid);
	ck_assert_int_eq(chown(lockdir, (uid_t)-1, 0), 0);
	lockdir_refused(dir, lockdir, "is open to another group");
	ck_assert_int_eq(chown(lockdir, (uid_t)-1, grp_gid), 0);
	lockdir_pool_works(dir);
	free(lockdir);
	free(dir);
}
END_TEST

/*
 * The link to the pool's registry.mdb repointed to a copy of it (a valid
 * LMDB file, of the same user), or replaced by that copy: LMDB would
 * read and write the copy.  Refused, the copy unchanged.
 */
START_TEST(test_repointed_registry_link_is_refused)
{
	char *lockdir, *dir = lockdir_pool(&lockdir, 0);
	char *reg = path_in(dir, "registry.mdb"), *link = path_in(lockdir, "registry.mdb");
	char *copy = path_in(tu_dir, "copy.mdb"), *keep = path_in(tu_dir, "copy.keep");

	copy_file(reg, copy);
	copy_file(reg, keep);
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(symlink(copy, link), 0);
	lockdir_refused(dir, lockdir, "links registry.mdb to a copy of it");
	ck_assert_msg(same_bytes(copy, keep), "the copy was written");
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(rename(copy, link), 0);
	lockdir_refused(dir, lockdir, "holds a copy of registry.mdb");
	ck_assert_msg(same_bytes(link, keep), "the copy was written");
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(symlink(reg, link), 0);
	lockdir_pool_works(dir);
	unlink(keep);
	free(keep);
	free(copy);
	free(link);
	free(reg);
	free(lockdir);
	free(dir);
}
END_TEST

/* ---- modes and groups ---- */

static const char *const pool_files[] = { "super", "registry.mdb", "registry.mdb-lock", "data" };
#define NPOOL_FILES (sizeof(pool_files) / sizeof(pool_files[0]))

/* Entries of a directory, "." and ".." left out. */
static size_t
files_in(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	ck_assert_msg(d != NULL, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

/*
 * Append to @p out every file of the pool whose mode (permission bits,
 * setgid) or group is not the one wanted.
 */
static void
modes_check(const char *dir, mode_t dmode, mode_t fmode, gid_t gid, char *out, size_t outsz)
{
	size_t off = strlen(out);
	struct stat st;
	char *file;

	if (stat(dir, &st) < 0 || (st.st_mode & 07777) != dmode || (gid != (gid_t)-1 &&
	    st.st_gid != gid))
		off += (size_t)snprintf(out + off, outsz - off, " directory %04o group %u (want %04o);",
				(unsigned)(st.st_mode & 07777), (unsigned)st.st_gid, (unsigned)dmode);
	for (size_t i = 0; i < NPOOL_FILES && off < outsz; i++) {
		file = path_in(dir, pool_files[i]);
		if (lstat(file, &st) < 0)
			off += (size_t)snprintf(out + off, outsz - off, " %s missing;", pool_files[i]);
		else if ((st.st_mode & 07777) != fmode || (gid != (gid_t)-1 && st.st_gid != gid))
			off += (size_t)snprintf(out + off, outsz - off, " %s %04o group %u (want %04o);",
					pool_files[i], (unsigned)(st.st_mode & 07777),
					(unsigned)st.st_gid, (unsigned)fmode);
		free(file);
	}
}

START_TEST(test_pool_files_are_private_whatever_the_umask)
{
	static const mode_t masks[] = { 0, 022, 077, 0777 };
	struct mkv_pool *pool;
	struct mkv_stat st;
	char name[32], *dir, one[512], bad[2048] = "";

	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		snprintf(name, sizeof(name), "umask%zu", i);
		dir = path_in(tu_dir, name);
		umask(masks[i]);
		TU_OK(open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool));
		umask(022);
		tu_stat(pool, &st);
		mkv_pool_close(&pool);
		one[0] = '\0';
		modes_check(dir, 0700, 0600, (gid_t)-1, one, sizeof(one));
		if (st.mode != 0600 || st.gid != 0)
			snprintf(one + strlen(one), sizeof(one) - strlen(one),
					" mkv_pool_stat mode %04o gid %u (want 0600, 0);", st.mode, st.gid);
		if (one[0])
			snprintf(bad + strlen(bad), sizeof(bad) - strlen(bad), "\n  umask %04o:%s",
					(unsigned)masks[i], one);
		free(dir);
	}
	ck_assert_msg(bad[0] == '\0', "a pool without a group is not private:%s", bad);
}
END_TEST

struct peek {
	const char *pool;
	const char *key;
	size_t len;
	const char *node;
};

/* Outsider: neither the pool nor its data file may be read. */
static int
outsider_reads(void *arg, struct as_user *out)
{
	struct peek *pk = arg;
	struct mkv_pool *pool;
	char *data;
	int rc, fd;

	rc = open_pool(pk->pool, MKV_RDONLY, (gid_t)-1, NULL, &pool);
	if (rc != -EACCES) {
		snprintf(out->msg, sizeof(out->msg), "mkv_pool_open(RDONLY) = %d (%s): \"%s\"; "
				"expected -EACCES", rc, mkv_strerror(rc), mkv_errormsg());
		if (rc == 0 && tu_check(pool, pk->key, strlen(pk->key), pk->len) == 0)
			snprintf(out->msg + strlen(out->msg), sizeof(out->msg) - strlen(out->msg),
					", and it read the value");
		return 1;
	}
	if (strstr(mkv_errormsg(), pk->pool) == NULL) {
		snprintf(out->msg, sizeof(out->msg), "the message of -EACCES, \"%s\", does not name "
				"the pool's file", mkv_errormsg());
		return 2;
	}
	rc = open_pool(pk->pool, 0, (gid_t)-1, "x", &pool);
	if (rc != -EACCES) {
		snprintf(out->msg, sizeof(out->msg), "mkv_pool_open(read-write) = %d (%s): \"%s\"; "
				"expected -EACCES", rc, mkv_strerror(rc), mkv_errormsg());
		return 3;
	}
	if (asprintf(&data, "%s/data", pk->pool) < 0)
		return 4;
	fd = open(data, O_RDONLY);
	if (fd >= 0) {
		snprintf(out->msg, sizeof(out->msg), "%s can be opened for reading by another user",
				data);
		return 5;
	}
	return 0;
}

START_TEST(test_private_pool_is_closed_to_other_users)
{
	struct mkv_pool *pool;
	char *dir = path_in(tu_dir, "pool");
	struct peek pk = { dir, "secret", 5000, NULL };
	struct as_user res;
	int rc;

	SKIP_UNLESS_USERS();
	TU_OK(open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool));
	TU_OK(tu_put(pool, "secret", 6, 5000));
	rc = as_user(out_name, outsider_reads, &pk, &res);
	mkv_pool_close(&pool);
	ck_assert_msg(rc == 0, "another user and a pool without a group: %s", res.msg);
	free(dir);
}
END_TEST

/* Insider: read-only open, get, the stat tool, then a read-write open and a put. */
static int
insider_uses(void *arg, struct as_user *out)
{
	struct peek *pk = arg;
	char tool[] = MKV_TOOLS_DIR "/marukv-stat";
	struct mkv_pool *pool;
	int rc;

	if ((rc = open_pool(pk->pool, MKV_RDONLY, (gid_t)-1, NULL, &pool)) != 0) {
		snprintf(out->msg, sizeof(out->msg), "mkv_pool_open(RDONLY) = %d (%s): %s", rc,
				mkv_strerror(rc), mkv_errormsg());
		return 1;
	}
	if ((rc = tu_check(pool, pk->key, strlen(pk->key), pk->len)) != 0) {
		snprintf(out->msg, sizeof(out->msg), "get: %d (%s): %s", rc, mkv_strerror(rc),
				mkv_errormsg());
		return 2;
	}
	mkv_pool_close(&pool);
	if (access(tool, X_OK) == 0) {
		rc = run((char *[]){ tool, (char *)pk->pool, NULL });
		if (rc != 0) {
			snprintf(out->msg, sizeof(out->msg), "marukv-stat exited with %d", rc);
			return 3;
		}
	} else {
		fprintf(stderr, "insider: %s not executable here, not run\n", tool);
	}
	if ((rc = open_pool(pk->pool, 0, (gid_t)-1, pk->node, &pool)) != 0) {
		snprintf(out->msg, sizeof(out->msg), "mkv_pool_open(read-write) = %d (%s): %s", rc,
				mkv_strerror(rc), mkv_errormsg());
		return 4;
	}
	if ((rc = tu_put(pool, "insider", 7, 3 * TU_PAGE_SIZE)) != 0) {
		snprintf(out->msg, sizeof(out->msg), "put: %d (%s): %s", rc, mkv_strerror(rc),
				mkv_errormsg());
		return 5;
	}
	mkv_pool_close(&pool);
	return 0;
}

START_TEST(test_group_pool_is_shared_with_its_group_only)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	char *dir = path_in(tu_dir, "gpool"), bad[1024] = "";
	struct peek pk = { dir, "shared", 7000, "b" };
	struct as_user res;
	int rc;

	SKIP_UNLESS_USERS();
	umask(077);
	TU_OK(open_pool(dir, MKV_CREATE, grp_gid, NULL, &pool));
	umask(022);
	TU_OK(tu_put(pool, "shared", 6, 7000));
	tu_stat(pool, &st);
	modes_check(dir, 0750, 0660, grp_gid, bad, sizeof(bad));
	ck_assert_msg(bad[0] == '\0' && st.mode == 0660 && st.gid == (uint32_t)grp_gid,
			"a pool created with group %u:%s mkv_pool_stat mode %04o gid %u",
			(unsigned)grp_gid, bad, st.mode, st.gid);

	rc = as_user(out_name, outsider_reads, &pk, &res);
	ck_assert_msg(rc == 0, "a user outside the pool's group: %s", res.msg);
	rc = as_user(in_name, insider_uses, &pk, &res);
	ck_assert_msg(rc == 0, "a user in the pool's group: %s", res.msg);
	ck_assert_int_eq(tu_check(pool, "insider", 7, 3 * TU_PAGE_SIZE), 0);
	mkv_pool_close(&pool);
	/* the insider could write the pool without writing its directory: nothing new in it */
	bad[0] = '\0';
	modes_check(dir, 0750, 0660, grp_gid, bad, sizeof(bad));
	ck_assert_msg(bad[0] == '\0' && files_in(dir) == NPOOL_FILES,
			"after the insider's writes:%s %zu files", bad, files_in(dir));
	free(dir);
}
END_TEST

struct create_arg {
	char *dir;
	gid_t gid;
};

static int
create_with_group(void *arg, struct as_user *out)
{
	struct create_arg *ca = arg;
	struct mkv_pool *pool;
	int rc = open_pool(ca->dir, MKV_CREATE, ca->gid, NULL, &pool);

	snprintf(out->msg, sizeof(out->msg), "mkv_pool_open(CREATE, group %u) = %d (%s): \"%s\"",
			(unsigned)ca->gid, rc, mkv_strerror(rc), mkv_errormsg());
	if (rc == 0) {
		mkv_pool_close(&pool);
		return 0;
	}
	return rc == MKV_E_PERM && mkv_errormsg()[0] ? 1 : 2;
}

START_TEST(test_group_the_creator_is_not_in_is_perm)
{
	struct create_arg ca;
	struct as_user res;
	char *home, bad[512] = "";
	int rc;

	SKIP_UNLESS_USERS();
	home = home_of(out_name);
	ca = (struct create_arg){ path_in(home, "pool"), grp_gid };
	rc = as_user(out_name, create_with_group, &ca, &res);
	ck_assert_msg(rc == 1, "a user not in group %u: %s; expected MKV_E_PERM",
			(unsigned)grp_gid, res.msg);
	free(ca.dir);
	free(home);

	/* a member may */
	home = home_of(in_name);
	ca = (struct create_arg){ path_in(home, "pool"), grp_gid };
	rc = as_user(in_name, create_with_group, &ca, &res);
	ck_assert_msg(rc == 0, "a user in group %u: %s", (unsigned)grp_gid, res.msg);
	modes_check(ca.dir, 0750, 0660, grp_gid, bad, sizeof(bad));
	ck_assert_msg(bad[0] == '\0', "a group pool made by a member:%s", bad);
	free(ca.dir);
	free(home);
}
END_TEST

/* ---- a non-coherent pool's lock directory: creation ---- */

/* two nodes of the pool's two, each with its two slots (open_pool()) */
#define OPENERS 4
#define OPEN_ROUNDS 10

/*
 * Processes opening a non-coherent pool at once on a host where its lock
 * directory is not there yet: each makes what is missing or finds it made
 * (directory, link, lock file), and every open succeeds.
 */
START_TEST(test_openers_racing_to_make_the_lockdir_all_open)
{
	char *lockdir, *dir = lockdir_pool(&lockdir, 1), *f;
	pid_t pid[OPENERS];
	int go[2];

	for (unsigned round = 0; round < OPEN_ROUNDS; round++) {
		ck_assert_int_eq(pipe(go), 0);
		for (unsigned i = 0; i < OPENERS; i++) {
			pid[i] = tu_fork();
			if (pid[i] == 0) {
				struct mkv_pool *pool;
				int rc;

				close(go[1]);
				if (tu_read_byte(go[0], 30) < 0)
					_exit(98);
				rc = open_pool(dir, i % 2 ? 0 : MKV_RDONLY, (gid_t)-1, i < 2 ? NULL : "n1",
						&pool);
				if (rc) {
					fprintf(stderr, "opener %u: %d (%s): %s\n", i, rc, mkv_strerror(rc),
							mkv_errormsg());
					_exit(rc == MKV_E_PERM ? 3 : 1);
				}
				rc = tu_check(pool, "k", 1, 3000);
				mkv_pool_close(&pool);
				_exit(rc ? 2 : 0);
			}
		}
		close(go[0]);
		/* all at once: each is blocked on the pipe until its byte comes */
		for (unsigned i = 0; i < OPENERS; i++)
			ck_assert_int_eq(tu_write_byte(go[1], 'g'), 0);
		close(go[1]);
		for (unsigned i = 0; i < OPENERS; i++) {
			int rc = tu_reap(pid[i], 30);

			ck_assert_msg(rc == 0, "round %u: opener %u: %d", round, i, rc);
		}
		f = path_in(lockdir, "registry.mdb-lock");
		ck_assert_int_eq(unlink(f), 0);
		free(f);
		f = path_in(lockdir, "registry.mdb");
		ck_assert_int_eq(unlink(f), 0);
		free(f);
		ck_assert_int_eq(rmdir(lockdir), 0);
	}
	lockdir_pool_works(dir);
	free(lockdir);
	free(dir);
}
END_TEST

/*
 * A creation of a non-coherent pool that fails after the registry (and
 * with it this host's lock directory) was made leaves no lock directory
 * behind: its uuid names no pool.  What fails: super.new is a directory
 * the creator cannot remove.
 */
START_TEST(test_failed_creation_leaves_no_lockdir)
{
	struct mkv_pool *pool;
	char *dir = path_in(tu_dir, "pool"), *blocker = path_in(dir, "super.new"),
		*inside = path_in(blocker, "x");
	int fd, rc;

	coherence = MKV_NONCOHERENT;
	ck_assert_int_eq(files_in(shm), 0);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(mkdir(blocker, 0700), 0);
	ck_assert_int_ge(fd = open(inside, O_CREAT | O_WRONLY, 0600), 0);
	close(fd);
	rc = open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool);
	ck_assert_msg(rc != 0 && pool == NULL, "creation past a super.new directory: %d", rc);
	ck_assert_msg(files_in(shm) == 0, "a failed creation left %zu entries in the lock base",
			files_in(shm));
	ck_assert_int_eq(files_in(dir), 1);
	ck_assert_int_eq(unlink(inside), 0);
	ck_assert_int_eq(rmdir(blocker), 0);
	TU_OK(open_pool(dir, MKV_CREATE, (gid_t)-1, NULL, &pool));
	mkv_pool_close(&pool);
	ck_assert_int_eq(files_in(shm), 1);
	free(inside);
	free(blocker);
	free(dir);
}
END_TEST


/*
 * A non-coherent pool with a group: its lock directory on this host is
 * the group's as the pool's directory is (0750, the group), its lock file
 * as the pool's files (0660); a member uses the pool and an outsider is
 * refused.  On a host where the directory is not there yet, a member
 * makes it for the group, and the pool's owner then opens the pool.
 */
START_TEST(test_group_noncoherent_pool_lockdir_is_the_groups)
{
	struct mkv_pool *pool;
	char *dir = path_in(tu_dir, "gpool"), *lockdir, *lock, *link;
	/* the member's handles on our node: marukv-stat's takes the other of two */
	struct peek pk = { dir, "shared", 7000, NULL };
	struct as_user res;
	struct stat st;
	int rc;

	SKIP_UNLESS_USERS();
	coherence = MKV_NONCOHERENT;
	umask(077);
	TU_OK(open_pool(dir, MKV_CREATE, grp_gid, NULL, &pool));
	umask(022);
	TU_OK(tu_put(pool, "shared", 6, 7000));
	lockdir = tu_lockdir(shm, pool);
	lock = path_in(lockdir, "registry.mdb-lock");
	link = path_in(lockdir, "registry.mdb");
	ck_assert_int_eq(stat(lockdir, &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0750 && st.st_gid == grp_gid,
			"lock directory %04o group %u", (unsigned)(st.st_mode & 07777),
			(unsigned)st.st_gid);
	ck_assert_int_eq(stat(lock, &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0660 && st.st_gid == grp_gid,
			"lock file %04o group %u", (unsigned)(st.st_mode & 07777), (unsigned)st.st_gid);
	rc = as_user(out_name, outsider_reads, &pk, &res);
	ck_assert_msg(rc == 0, "a user outside the pool's group: %s", res.msg);
	rc = as_user(in_name, insider_uses, &pk, &res);
	ck_assert_msg(rc == 0, "a user in the pool's group: %s", res.msg);
	ck_assert_int_eq(tu_check(pool, "insider", 7, 3 * TU_PAGE_SIZE), 0);
	/* for the member's put below */
	TU_OK(mkv_del(pool, "insider", 7));
	mkv_pool_close(&pool);

	ck_assert_int_eq(unlink(lock), 0);
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(rmdir(lockdir), 0);
	rc = as_user(in_name, insider_uses, &pk, &res);
	ck_assert_msg(rc == 0, "a member making the lock directory: %s", res.msg);
	ck_assert_int_eq(stat(lockdir, &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0750 && st.st_gid == grp_gid,
			"lock directory a member made: %04o group %u", (unsigned)(st.st_mode & 07777),
			(unsigned)st.st_gid);
	TU_OK(open_pool(dir, 0, (gid_t)-1, NULL, &pool));
	ck_assert_int_eq(tu_check(pool, "shared", 6, 7000), 0);
	mkv_pool_close(&pool);
	free(link);
	free(lock);
	free(lockdir);
	free(dir);
}
END_TEST


static Suite *
security_suite(void)
{
	Suite *s = suite_create("security");
	TCase *tc;

	tc = tcase_create("links");
	tcase_add_checked_fixture(tc, sec_setup, sec_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_symlinked_super_new_is_not_followed);
	tcase_add_test(tc, test_symlinked_data_is_not_followed);
	tcase_add_test(tc, test_symlinked_registry_is_not_followed);
	tcase_add_test(tc, test_symlinked_registry_lock_is_not_followed);
	tcase_add_test(tc, test_symlinked_node_lock_is_not_followed);
	tcase_add_test(tc, test_symlinked_super_is_not_followed);
	tcase_add_test(tc, test_symlinked_pool_path_of_another_user_is_not_followed);
	tcase_add_test(tc, test_create_while_another_user_swaps_the_path);
	tcase_add_test(tc, test_symlinked_pool_path_is_refused);
	tcase_add_test(tc, test_world_writable_pool_dir_is_refused);
	tcase_add_test(tc, test_planted_files_in_own_dir_are_refused);
	tcase_add_test(tc, test_symlinked_file_of_existing_pool_is_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("lockdir");
	tcase_add_checked_fixture(tc, sec_setup, sec_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_lockdir_of_another_user_is_refused);
	tcase_add_test(tc, test_planted_link_in_lockdir_is_not_followed);
	tcase_add_test(tc, test_lockdir_wider_than_pool_dir_is_refused);
	tcase_add_test(tc, test_lockdir_of_another_group_is_refused);
	tcase_add_test(tc, test_repointed_registry_link_is_refused);
	tcase_add_test(tc, test_openers_racing_to_make_the_lockdir_all_open);
	tcase_add_test(tc, test_failed_creation_leaves_no_lockdir);
	tcase_add_test(tc, test_group_noncoherent_pool_lockdir_is_the_groups);
	suite_add_tcase(s, tc);

	tc = tcase_create("modes");
	tcase_add_checked_fixture(tc, sec_setup, sec_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pool_files_are_private_whatever_the_umask);
	tcase_add_test(tc, test_private_pool_is_closed_to_other_users);
	tcase_add_test(tc, test_group_pool_is_shared_with_its_group_only);
	tcase_add_test(tc, test_group_the_creator_is_not_in_is_perm);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * As root, the users live for the whole run: made before the suite, and
 * removed by a parent that outlives it (an interrupted or killed run of
 * the suite still removes them).
 */
int
main(void)
{
	pid_t pid;
	int rc;

	if (geteuid() != 0)
		return tu_run_suite(security_suite());
	users_remove_stale();
	users_make();
	/* a closed output pipe must not kill the suite before it cleans up */
	signal(SIGPIPE, SIG_IGN);
	pid = fork();
	if (pid < 0) {
		users_remove();
		return EXIT_FAILURE;
	}
	if (pid == 0)
		_exit(tu_run_suite(security_suite()));
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	rc = tu_wait(pid);
	users_remove();
	return rc;
}
