"""Learning to rank: LETOR/LightGBM data readers and ranking metrics (NDCG@k, P@k, MAP)."""
