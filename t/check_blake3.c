/* SPDX-License-Identifier: MIT */
/*
 * check_blake3.c -- BLAKE3 (blake3.c), the checksum of MRDN v1 frames:
 * the official test vectors, input fed in any pieces, and Debian's b3sum
 * --length 16 (the frame's truncation) on random inputs of many sizes.
 *
 * The vectors are the hash mode's cases of the BLAKE3 repository's
 * test_vectors/test_vectors.json, copied as published: each input is
 * input_len bytes of 0, 1, ..., 250, 0, 1, ...; each hash is 131 bytes of
 * extended output, whose first 32 bytes are the default-length hash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "blake3.h"

static const struct {
	size_t input_len;
	const char *hash;
} vectors[] = {
	{ 0,
	  "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262e0"
	  "0f03e7b69af26b7faaf09fcd333050338ddfe085b8cc869ca98b206c08243a26f5"
	  "487789e8f660afe6c99ef9e0c52b92e7393024a80459cf91f476f9ffdbda7001c2"
	  "2e159b402631f277ca96f2defdf1078282314e763699a31c5363165421cce14d" },
	{ 1,
	  "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213c3"
	  "a6cb8bf623e20cdb535f8d1a5ffb86342d9c0b64aca3bce1d31f60adfa137b358a"
	  "d4d79f97b47c3d5e79f179df87a3b9776ef8325f8329886ba42f07fb138bb502f4"
	  "081cbcec3195c5871e6c23e2cc97d3c69a613eba131e5f1351f3f1da786545e5" },
	{ 1023,
	  "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11a1"
	  "82d27a591b05592b15607500e1e8dd56bc6c7fc063715b7a1d737df5bad3339c56"
	  "778957d870eb9717b57ea3d9fb68d1b55127bba6a906a4a24bbd5acb2d123a37b2"
	  "8f9e9a81bbaae360d58f85e5fc9d75f7c370a0cc09b6522d9c8d822f2f28f485" },
	{ 1024,
	  "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af71c"
	  "f8107265ecdaf8505b95d8fcec83a98a6a96ea5109d2c179c47a387ffbb404756f"
	  "6eeae7883b446b70ebb144527c2075ab8ab204c0086bb22b7c93d465efc57f8d91"
	  "7f0b385c6df265e77003b85102967486ed57db5c5ca170ba441427ed9afa684e" },
	{ 1025,
	  "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444f4"
	  "c4a22b4b399155358a994e52bf255de60035742ec71bd08ac275a1b51cc6bfe332"
	  "b0ef84b409108cda080e6269ed4b3e2c3f7d722aa4cdc98d16deb554e5627be8f9"
	  "55c98e1d5f9565a9194cad0c4285f93700062d9595adb992ae68ff12800ab67a" },
	{ 2048,
	  "e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a9a"
	  "60bf80001410ec9eea6698cd537939fad4749edd484cb541aced55cd9bf54764d0"
	  "63f23f6f1e32e12958ba5cfeb1bf618ad094266d4fc3c968c2088f677454c288c6"
	  "7ba0dba337b9d91c7e1ba586dc9a5bc2d5e90c14f53a8863ac75655461cea8f9" },
	{ 2049,
	  "5f4d72f40d7a5f82b15ca2b2e44b1de3c2ef86c426c95c1af0b687952256303096"
	  "de31d71d74103403822a2e0bc1eb193e7aecc9643a76b7bbc0c9f9c52e8783aae9"
	  "8764ca468962b5c2ec92f0c74eb5448d519713e09413719431c802f948dd5d9042"
	  "5a4ecdadece9eb178d80f26efccae630734dff63340285adec2aed3b51073ad3" },
	{ 3072,
	  "b98cb0ff3623be03326b373de6b9095218513e64f1ee2edd2525c7ad1e5cffd29a"
	  "3f6b0b978d6608335c09dc94ccf682f9951cdfc501bfe47b9c9189a6fc7b404d12"
	  "0258506341a6d802857322fbd20d3e5dae05b95c88793fa83db1cb08e7d8008d15"
	  "99b6209d78336e24839724c191b2a52a80448306e0daa84a3fdb566661a37e11" },
	{ 3073,
	  "7124b49501012f81cc7f11ca069ec9226cecb8a2c850cfe644e327d22d3e1cd39a"
	  "27ae3b79d68d89da9bf25bc27139ae65a324918a5f9b7828181e52cf373c84f35b"
	  "639b7fccbb985b6f2fa56aea0c18f531203497b8bbd3a07ceb5926f1cab74d14bd"
	  "66486d9a91eba99059a98bd1cd25876b2af5a76c3e9eed554ed72ea952b603bf" },
	{ 4096,
	  "015094013f57a5277b59d8475c0501042c0b642e531b0a1c8f58d2163229e96902"
	  "89e9409ddb1b99768eafe1623da896faf7e1114bebeadc1be30829b6f8af707d85"
	  "c298f4f0ff4d9438aef948335612ae921e76d411c3a9111df62d27eaf871959ae0"
	  "062b5492a0feb98ef3ed4af277f5395172dbe5c311918ea0074ce0036454f620" },
	{ 4097,
	  "9b4052b38f1c5fc8b1f9ff7ac7b27cd242487b3d890d15c96a1c25b8aa0fb99505"
	  "f91b0b5600a11251652eacfa9497b31cd3c409ce2e45cfe6c0a016967316c426bd"
	  "26f619eab5d70af9a418b845c608840390f361630bd497b1ab44019316357c61db"
	  "e091ce72fc16dc340ac3d6e009e050b3adac4b5b2c92e722cffdc46501531956" },
	{ 5120,
	  "9cadc15fed8b5d854562b26a9536d9707cadeda9b143978f319ab34230535833ac"
	  "c61c8fdc114a2010ce8038c853e121e1544985133fccdd0a2d507e8e615e611e9a"
	  "0ba4f47915f49e53d721816a9198e8b30f12d20ec3689989175f1bf7a300eee0d9"
	  "321fad8da232ece6efb8e9fd81b42ad161f6b9550a069e66b11b40487a5f5059" },
	{ 5121,
	  "628bd2cb2004694adaab7bbd778a25df25c47b9d4155a55f8fbd79f2fe154cff96"
	  "adaab0613a6146cdaabe498c3a94e529d3fc1da2bd08edf54ed64d40dcd6777647"
	  "eac51d8277d70219a9694334a68bc8f0f23e20b0ff70ada6f844542dfa32cd4204"
	  "ca1846ef76d811cdb296f65e260227f477aa7aa008bac878f72257484f2b6c95" },
	{ 6144,
	  "3e2e5b74e048f3add6d21faab3f83aa44d3b2278afb83b80b3c35164ebeca2054d"
	  "742022da6fdda444ebc384b04a54c3ac5839b49da7d39f6d8a9db03deab32aade1"
	  "56c1c0311e9b3435cde0ddba0dce7b26a376cad121294b689193508dd63151603c"
	  "6ddb866ad16c2ee41585d1633a2cea093bea714f4c5d6b903522045b20395c83" },
	{ 6145,
	  "f1323a8631446cc50536a9f705ee5cb619424d46887f3c376c695b70e0f0507f18"
	  "a2cfdd73c6e39dd75ce7c1c6e3ef238fd54465f053b25d21044ccb2093beb01501"
	  "5532b108313b5829c3621ce324b8e14229091b7c93f32db2e4e63126a377d2a63a"
	  "3597997d4f1cba59309cb4af240ba70cebff9a23d5e3ff0cdae2cfd54e070022" },
	{ 7168,
	  "61da957ec2499a95d6b8023e2b0e604ec7f6b50e80a9678b89d2628e99ada77a57"
	  "07c321c83361793b9af62a40f43b523df1c8633cecb4cd14d00bdc79c78fca5165"
	  "b863893f6d38b02ff7236c5a9a8ad2dba87d24c547cab046c29fc5bc1ed142e1de"
	  "4763613bb162a5a538e6ef05ed05199d751f9eb58d332791b8d73fb74e4fce95" },
	{ 7169,
	  "a003fc7a51754a9b3c7fae0367ab3d782dccf28855a03d435f8cfe74605e781798"
	  "a8b20534be1ca9eb2ae2df3fae2ea60e48c6fb0b850b1385b5de0fe460dbe9d9f9"
	  "b0d8db4435da75c601156df9d047f4ede008732eb17adc05d96180f8a735485228"
	  "40779e6062d643b79478a6e8dbce68927f36ebf676ffa7d72d5f68f050b119c8" },
	{ 8192,
	  "aae792484c8efe4f19e2ca7d371d8c467ffb10748d8a5a1ae579948f718a2a635f"
	  "e51a27db045a567c1ad51be5aa34c01c6651c4d9b5b5ac5d0fd58cf18dd61a4777"
	  "8566b797a8c67df7b1d60b97b19288d2d877bb2df417ace009dcb0241ca1257d62"
	  "712b6a4043b4ff33f690d849da91ea3bf711ed583cb7b7a7da2839ba71309bbf" },
	{ 8193,
	  "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3bb2"
	  "282aa69be089359ea1154b9a9286c4a56af4de975a9aa4a5c497654914d279bea6"
	  "0bb6d2cf7225a2fa0ff5ef56bbe4b149f3ed15860f78b4e2ad04e158e375c1e0c0"
	  "b551cd7dfc82f1b155c11b6b3ed51ec9edb30d133653bb5709d1dbd55f4e1ff6" },
	{ 16384,
	  "f875d6646de28985646f34ee13be9a576fd515f76b5b0a26bb324735041ddde49d"
	  "764c270176e53e97bdffa58d549073f2c660be0e81293767ed4e4929f9ad34bbb3"
	  "9a529334c57c4a381ffd2a6d4bfdbf1482651b172aa883cc13408fa67758a3e475"
	  "03f93f87720a3177325f7823251b85275f64636a8f1d599c2e49722f42e93893" },
	{ 31744,
	  "62b6960e1a44bcc1eb1a611a8d6235b6b4b78f32e7abc4fb4c6cdcce94895c4786"
	  "0cc51f2b0c28a7b77304bd55fe73af663c02d3f52ea053ba43431ca5bab7bfea2f"
	  "5e9d7121770d88f70ae9649ea713087d1914f7f312147e247f87eb2d4ffef0ac97"
	  "8bf7b6579d57d533355aa20b8b77b13fd09748728a5cc327a8ec470f4013226f" },
	{ 102400,
	  "bc3e3d41a1146b069abffad3c0d44860cf664390afce4d9661f7902e7943e085e0"
	  "1c59dab908c04c3342b816941a26d69c2605ebee5ec5291cc55e15b76146e6745f"
	  "0601156c3596cb75065a9c57f35585a52e1ac70f69131c23d611ce11ee4ab1ec2c"
	  "009012d236648e77be9295dd0426f29b764d65de58eb7d01dd42248204f45f8e" },
};
#define NVECTORS (sizeof(vectors) / sizeof(vectors[0]))
#define MAX_VECTOR 102400U

static void
hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

START_TEST(test_official_vectors)
{
	uint8_t *in = malloc(MAX_VECTOR), out[MKV_B3_OUT];
	char got[2 * MKV_B3_OUT + 1];

	ck_assert_ptr_nonnull(in);
	for (size_t i = 0; i < MAX_VECTOR; i++)
		in[i] = (uint8_t)(i % 251);
	for (size_t pass = 0; pass < 2 * NVECTORS; pass++) {
		size_t v = pass % NVECTORS;

		/* each vector with AVX2 where the CPU has it, then with the portable code */
		mkv_b3_simd = pass < NVECTORS;
		ck_assert_uint_le(vectors[v].input_len, MAX_VECTOR);
		mkv_b3(in, vectors[v].input_len, out, sizeof(out));
		hex(out, sizeof(out), got);
		ck_assert_msg(strncmp(got, vectors[v].hash, 2 * MKV_B3_OUT) == 0,
				"input_len %zu: %s, published %.64s", vectors[v].input_len, got,
				vectors[v].hash);
		/* a shorter output is a prefix of the longer */
		mkv_b3(in, vectors[v].input_len, out, 16);
		hex(out, 16, got);
		ck_assert_int_eq(strncmp(got, vectors[v].hash, 32), 0);
	}
	mkv_b3_simd = true;
	free(in);
}
END_TEST

#define LEN (3U * 1024 * 64 + 77)
#define NCUTS 10U
#define NLONGER 8U

/*
 * Input fed in pieces of every awkward size (a byte, a block and one
 * either side, a chunk and one either side, random) hashes as one piece.
 */
START_TEST(test_pieces_hash_as_one)
{
	/* the last two start the SIMD path, which takes sixteen chunks, off a multiple of them */
	static const size_t cuts[NCUTS] = { 1, 63, 64, 65, 1023, 1024, 1025, 4096, 20000, 40000 };
	static const size_t longer[NLONGER] = { 2047, 2048, 2049, 4095, 4096, 4097, 65537, LEN };
	uint8_t *in = malloc(LEN), whole[MKV_B3_OUT], part[MKV_B3_OUT];
	uint64_t seed = 3;

	ck_assert_ptr_nonnull(in);
	for (size_t i = 0; i < LEN; i++)
		in[i] = (uint8_t)tu_rand(&seed);
	for (size_t l = 0; l < 1100 + NLONGER; l++) {
		size_t len = l < 1100 ? l : longer[l - 1100];

		mkv_b3(in, len, whole, sizeof(whole));
		for (size_t c = 0; c <= NCUTS; c++) {
			struct mkv_b3 h;
			size_t off = 0;

			mkv_b3_init(&h);
			while (off < len) {
				size_t n = c < NCUTS ? cuts[c] : tu_rand_range(&seed, 0, 3000);

				n = n < len - off ? n : len - off;
				mkv_b3_update(&h, in + off, n);
				off += n;
			}
			mkv_b3_final(&h, part, sizeof(part));
			ck_assert_msg(memcmp(whole, part, sizeof(part)) == 0,
					"%zu bytes in pieces of %zu hash differently", len,
					c < NCUTS ? cuts[c] : 0);
		}
	}
	free(in);
}
END_TEST

/*
 * Random inputs of many sizes, up to a 32 MiB value: the 16 bytes a frame
 * carries are b3sum --length 16's.
 */
START_TEST(test_sixteen_bytes_are_b3sums)
{
	static const size_t sizes[] = {
		0, 1, 63, 64, 65, 1023, 1024, 1025, 2047, 2048, 2049, 65535, 65536, 65537,
		1U << 20, (1U << 20) + 3, 32U << 20,
	};
	uint8_t *in = malloc(32U << 20), out[16], sum[16];
	char want[33], got[33];
	uint64_t seed = 16;

	ck_assert_ptr_nonnull(in);
	for (size_t i = 0; i < (32U << 20); i += 8) {
		uint64_t r = tu_rand(&seed);

		memcpy(in + i, &r, 8);
	}
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) + 8; s++) {
		size_t len = s < sizeof(sizes) / sizeof(sizes[0]) ? sizes[s] :
				tu_rand_range(&seed, 2, 4U << 20);

		tu_b3sum16(in, len, sum);
		hex(sum, sizeof(sum), want);
		for (int simd = 1; simd >= 0; simd--) {
			mkv_b3_simd = simd;
			mkv_b3(in, len, out, sizeof(out));
			hex(out, sizeof(out), got);
			ck_assert_msg(strcmp(got, want) == 0, "%zu bytes (%s): %s, b3sum says %s", len,
					simd ? "simd" : "portable", got, want);
		}
		mkv_b3_simd = true;
	}
	free(in);
}
END_TEST

static Suite *
blake3_suite(void)
{
	Suite *s = suite_create("blake3");
	TCase *tc = tcase_create("hash");

	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_official_vectors);
	tcase_add_test(tc, test_pieces_hash_as_one);
	tcase_add_test(tc, test_sixteen_bytes_are_b3sums);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(blake3_suite());
}
